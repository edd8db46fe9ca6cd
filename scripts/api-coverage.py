"""The coverage table: every row of docs/apple-api/*.tsv looked up among our symbols.
Run through scripts/api-coverage, which extracts the symbol graphs this reads."""
import csv, glob, json, os, re, sys

docs, graphs, out, source_dir = sys.argv[1:5]

# Apple symbols that cannot exist on Linux, with why.
NOT_APPLICABLE = {
    "LAContext.ObjectWillChangePublisher": "Combine (ObservableObject) is not available on Linux",
    "CFRelease": "unavailable in Swift on Apple platforms too (ARC)",
    "CFRetain": "unavailable in Swift on Apple platforms too (ARC)",
    "SecAddSharedWebCredential(_:_:_:_:)": "Safari's shared web credentials: iOS only (an associated-domains entitlement and Safari's password store)",
    "SecRequestSharedWebCredential(_:_:_:)": "Safari's shared web credentials: iOS only (an associated-domains entitlement and Safari's password store)",
    "SecCreateSharedWebCredentialPassword()": "Safari's shared web credentials: iOS only (an associated-domains entitlement and Safari's password store)",
    "kSecSharedPassword": "Safari's shared web credentials: iOS only (an associated-domains entitlement and Safari's password store)",
}
NOT_APPLICABLE_PREFIXES = {
    "LARight.authorize(localizedReason:in:": "authorizes in a window (LAPresentationContext); Linux has no UIKit/AppKit windows",
    "LAAuthenticationView": "a SwiftUI/AppKit view; Linux has neither",
    "LAPresentationContext": "a UIKit/AppKit window reference; Linux has neither",
}

def rows(name):
    with open(os.path.join(docs, name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))

# Our symbols: dotted path -> doc comment.
ours, aliases = {}, {}
for path in glob.glob(os.path.join(graphs, "*.symbols.json")):
    with open(path, encoding="utf-8") as f:
        graph = json.load(f)
    for s in graph["symbols"]:
        key = ".".join(s["pathComponents"])
        doc = " ".join(l["text"] for l in (s.get("docComment") or {}).get("lines", []))
        ours.setdefault(key, doc)
        if s["kind"]["identifier"] == "swift.typealias":
            target = [f["spelling"] for f in s.get("declarationFragments", []) if f.get("kind") == "typeIdentifier"]
            if target:
                aliases[key] = target[-1]

def split_top(params):
    depth, part, parts = 0, "", []
    for ch in params:
        if ch in "([<": depth += 1
        if ch in ")]>": depth -= 1
        if ch == "," and depth == 0:
            parts.append(part); part = ""
        else:
            part += ch
    if part.strip(): parts.append(part)
    return parts

def function_key(name, params):
    labels = []
    for p in split_top(params):
        p = p.strip()
        if not p: continue
        head = p.split(":")[0].split()
        labels.append(head[0] + ":")
    return "%s(%s)" % (name, "".join(labels))

def key_of(symbol):
    """A row's symbol as our dotted path (labels in Swift's selector form)."""
    s = symbol.strip().replace("`", "")
    s = re.sub(r"^(@\w+\s+)*(optional\s+)?", "", s)
    s = re.sub(r"^(static |class |final |open |public )*(func|var|let|case|class|struct|enum|protocol|typealias|init)?\s*", lambda m: "" if m.group(2) != "init" else "init", s)
    m = re.match(r"^([\w.]+)\s*\((.*)\)", s)
    if m and not re.match(r"^[\w.]+\s*\(rawValue", s):
        # function or initializer: the parameter list up to its closing parenthesis
        name = m.group(1)
        depth, end = 0, None
        start = s.index("(")
        for i in range(start, len(s)):
            if s[i] == "(": depth += 1
            elif s[i] == ")":
                depth -= 1
                if depth == 0:
                    end = i; break
        return function_key(name, s[start + 1:end])
    return re.split(r"[\s:=({]", s, maxsplit=1)[0]

sources = ""
for dirpath, _, files in os.walk(source_dir):
    for name in files:
        if name.endswith(".swift"):
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                sources += f.read()

def lookup(key):
    if key in ours: return key
    # The compiler's symbol graph leaves out underscored names (LAError._nsError, init(_nsError:)).
    last = key.split(".")[-1]
    if last.startswith("_") or "(_" in last and last.split("(")[1].startswith("_nsError"):
        member = last.split("(")[0]
        if re.search(r"public (let|var|init)\s*%s" % re.escape(member if member != "init" else "(_nsError"), sources):
            return key
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in aliases:
            alt = ".".join([aliases[head]] + parts[i:])
            if alt in ours: return alt
    return None

def algorithm_gap(name):
    """Why an algorithm does not run on Linux (SecKeyAlgorithmTests pins the same list)."""
    if "SHA224" in name: return "not runnable on Linux: swift-crypto has no SHA-224"
    if name in ("rsaSignatureRaw", "rsaEncryptionRaw"): return "not runnable on Linux: swift-crypto has no raw RSA"
    if name.startswith("rsaSignatureDigest"): return "not runnable on Linux: swift-crypto signs RSA only over digests it made (use the message form)"
    if name.startswith("rsaEncryptionOAEP") and ("SHA384" in name or "SHA512" in name):
        return "not runnable on Linux: swift-crypto offers OAEP with SHA-1 and SHA-256 only"
    return None

def note_of(doc):
    m = re.search(r"(Our (?:choice|difference|note|mapping)[^.]*\.(?:[^.]*\.)?)", doc)
    return m.group(1).strip() if m else None

sections = [
    ("Security: kSec constants", "ksec.tsv", lambda r: r["name"]),
    ("Security: errSec codes", "errsec.tsv", lambda r: r["name"]),
    ("Security: SecKeyAlgorithm", "seckeyalgorithm.tsv", lambda r: r["swift_name"]),
    ("Security and CoreFoundation: functions and types", "functions.tsv", lambda r: r["name"] if not r["swift_signature"].startswith("func ") else key_of(r["swift_signature"])),
    ("LocalAuthentication", "localauthentication.tsv", lambda r: key_of(r["symbol"])),
]

lines, totals = [], []
for title, file, keyer in sections:
    counts = {"present": 0, "different": 0, "not applicable": 0, "missing": 0}
    table = []
    seen = set()
    for r in rows(file):
        key = keyer(r)
        if key in seen: continue
        seen.add(key)
        found = lookup(key)
        if key in NOT_APPLICABLE or any(key.startswith(p) for p in NOT_APPLICABLE_PREFIXES):
            status, note = "not applicable", NOT_APPLICABLE.get(key) or next(v for p, v in NOT_APPLICABLE_PREFIXES.items() if key.startswith(p))
        elif found is None:
            status, note = "missing", ""
        else:
            why = note_of(ours.get(found, "")) or (algorithm_gap(key.split(".")[-1]) if file == "seckeyalgorithm.tsv" else None)
            status, note = ("different", why) if why else ("present", "" if found == key else "as " + found)
        counts[status] += 1
        table.append("| `%s` | %s | %s |" % (key.replace("|", "\\|"), status, (note or "").replace("|", "\\|")))
    totals.append((title, counts))
    lines += ["", "## " + title, "", "| Apple symbol | ours | note |", "|---|---|---|"] + table

head = ["# Apple's API on Linux: coverage", "",
        "Generated by `bash scripts/api-coverage` from docs/apple-api/*.tsv (our extract of Apple's headers,",
        "Security sources and documentation) against the public symbols of our Security, LocalAuthentication",
        "and CryptoKit modules, read by the compiler. \"different\": present, with a documented difference (the",
        "note quotes our doc comment). Do not edit by hand.", "",
        "Differences no symbol shows:",
        "- `import Foundation` alone does not bring Security's names, as Apple's Foundation does: Linux's",
        "  Foundation is not ours to change. Add `import Security` (or `import LocalAuthentication`), or, for",
        "  code written for Apple platforms, build its target with an implicit import of Security:",
        "  `swiftSettings: [.unsafeFlags([\"-Xfrontend\", \"-import-module\", \"-Xfrontend\", \"Security\"])]` (README,",
        "  \"Using it from your own package\").",
        "- The CF types are Foundation's classes (`CFString` is `NSString`, `CFDictionary` `NSDictionary`, `CFError`",
        "  `NSError`); an `NSString` hashes as its `String` in `AnyHashable`, as on Apple platforms.",
        "- `error as? LAError` reads an `NSError` in `LAErrorDomain` (through `_ObjectiveCBridgeable`, which the",
        "  Swift runtime honours without Objective-C).", "",
        "| framework part | present | different | not applicable | missing |", "|---|---|---|---|---|"]
for title, c in totals:
    head.append("| %s | %d | %d | %d | %d |" % (title, c["present"], c["different"], c["not applicable"], c["missing"]))
# Public keychain wrappers' own suites, run unchanged by scripts/peer-suites: the commits, and each
# test that cannot pass on Linux with why.
peer = rows("peer-suites.tsv")
lines += ["", "## Keychain wrappers' own suites", "",
          "`bash scripts/peer-suites --keychain-swift DIR --keychain-access DIR` runs each wrapper's XCTest suite,",
          "unmodified, against this package (checkouts at the commits below; their code is never committed here).",
          "Every test not listed here passes on Linux; `KeychainConcurrencyTests`, `KeychainTests` and the",
          "`SecRandomCopyBytes` tests check, in our own words, what those suites check that ours did not.",
          "Each run's tally and timings: docs/benchmarks.md, \"A Swift developer's first hour\".", ""]
lines += ["- %s at %s" % (r["suite"], r["note"]) for r in peer if r["status"] == "commit"]
lines += ["", "| suite | test | status | why |", "|---|---|---|---|"]
lines += ["| %s | `%s` | %s | %s |" % (r["suite"], r["test"], r["status"], r["note"].replace("|", "\\|")) for r in peer if r["status"] != "commit"]
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(head + lines) + "\n")
for title, c in totals:
    print("%-50s present %4d  different %3d  n/a %2d  missing %3d" % (title, c["present"], c["different"], c["not applicable"], c["missing"]))
