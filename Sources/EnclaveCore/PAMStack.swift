import Foundation

/// What a PAM service's `auth` stack can accept, read from its configuration the way Linux-PAM
/// reads it (`type control module args`, `-type`, bracketed controls, `include` / `substack`, and
/// Debian's `@include`). The daemon treats a PAM success as *the passcode*: a stack that may also
/// succeed on a fingerprint, a token or a one-time code would record that as a passcode success, so
/// such a stack is refused (`otherFactors` not empty).
///
/// Our own judgment, by module name: the modules below are the ones Debian ships or users commonly
/// add that authenticate by something other than a typed password. An unknown module is not
/// flagged; `lactl doctor` prints every auth module so a person can judge the rest.
public struct PAMStack: Sendable, Equatable {
    /// The `auth` modules, in order, by file name without `.so` (`pam_unix`).
    public var authModules: [String]
    /// Files named by the stack that could not be read (an include of a missing file).
    public var missing: [String]

    /// Modules that authenticate by a factor other than a typed password. Our own `pam_laenclave`
    /// (issue 32) among them: a finger, and a stack that asks this daemon from inside its own
    /// password check would wait on itself (`pam-auth-update` puts it in common-auth, which
    /// `login`, the default login-password service, includes).
    public static let otherFactorModules: Set<String> = [
        "pam_laenclave", "pam_fprintd", "pam_u2f", "pam_yubico", "pam_oath", "pam_google_authenticator", "pam_howdy",
        "pam_p11", "pam_pkcs11", "pam_ssh_agent_auth", "pam_duo", "pam_usb", "pam_face", "pam_biometric",
        "pam_rhosts", "pam_rootok", "pam_timestamp",
    ]

    /// The modules of the stack that can succeed without the typed password.
    public var otherFactors: [String] {
        var seen = Set<String>()
        return authModules.filter { Self.otherFactorModules.contains($0) && seen.insert($0).inserted }
    }

    /// Reads `service` through `read` (a service or included file name → its text, nil if absent).
    public static func read(service: String, _ read: (String) -> String?) -> PAMStack {
        var stack = PAMStack(authModules: [], missing: [])
        var visiting: [String] = []
        func walk(_ file: String) {
            // PAM's own limit is lower; a loop ends here
            guard !visiting.contains(file), visiting.count < 16 else { return }
            guard let text = read(file) else {
                stack.missing.append(file)
                return
            }
            visiting.append(file)
            defer { visiting.removeLast() }
            for line in logicalLines(text) {
                let words = fields(line)
                guard let first = words.first else { continue }
                if first == "@include" {
                    if words.count > 1 { walk(words[1]) }
                    continue
                }
                let type = first.hasPrefix("-") ? String(first.dropFirst()) : first
                guard type.lowercased() == "auth", words.count >= 3 else { continue }
                let control = words[1]
                let module = words[2]
                if control == "include" || control == "substack" {
                    walk(module)
                    continue
                }
                stack.authModules.append(moduleName(module))
            }
        }
        walk(service)
        return stack
    }

    /// Which of `services` authenticate through `module` (`pam_laenclave`), includes followed:
    /// what `lactl doctor` says of where the PAM module is enabled.
    public static func services(using module: String, among services: [String], _ read: (String) -> String?) -> [String]
    {
        services.sorted().filter { PAMStack.read(service: $0, read).authModules.contains(module) }
    }

    /// A service or included file as Linux-PAM finds it: an absolute path as it is, else in
    /// `/etc/pam.d`, then the vendor directory `/usr/lib/pam.d`. The one file read of this type,
    /// for `read`'s callers (the daemon before each PAM check, `lactl doctor`).
    public static func systemFile(_ name: String) -> String? {
        let paths = name.hasPrefix("/") ? [name] : ["/etc/pam.d/\(name)", "/usr/lib/pam.d/\(name)"]
        return paths.lazy.compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }.first
    }

    /// `pam_unix` for `pam_unix.so` and `/lib/x86_64-linux-gnu/security/pam_unix.so`.
    static func moduleName(_ path: String) -> String {
        var name = path.split(separator: "/").last.map(String.init) ?? path
        if name.hasSuffix(".so") { name.removeLast(3) }
        return name
    }

    /// Lines without comments, with `\`-continuations joined.
    static func logicalLines(_ text: String) -> [String] {
        var lines: [String] = []
        var pending = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = String(raw)
            if let hash = line.firstIndex(of: "#") { line = String(line[..<hash]) }
            if line.hasSuffix("\\") {
                pending += line.dropLast() + " "
                continue
            }
            lines.append(pending + line)
            pending = ""
        }
        if !pending.isEmpty { lines.append(pending) }
        return lines
    }

    /// Whitespace-separated fields; a `[...]` control is one field, spaces and all.
    static func fields(_ line: String) -> [String] {
        var result: [String] = []
        var current = ""
        var depth = 0
        for c in line {
            if c == "[" { depth += 1 }
            if c == "]" { depth = max(0, depth - 1) }
            if (c == " " || c == "\t") && depth == 0 {
                if !current.isEmpty {
                    result.append(current)
                    current = ""
                }
            } else {
                current.append(c)
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }
}
