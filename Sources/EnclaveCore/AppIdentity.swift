/// Which app a client is, decided from what the kernel says about the executable it runs — never
/// from anything the client sends.
///
/// The kernel names the executable (`/proc/PID/exe`) as the *client* sees it, inside the client's
/// mount namespace: a process in a namespace of its own can bind-mount any file over
/// `/usr/bin/victim` and be named `/usr/bin/victim`. The file it runs, though (device and inode of
/// `/proc/PID/exe`), is the same in every namespace. So a path is the app's identity only when the
/// daemon, in its own view, finds that very file at that path. A sandboxed app is named by what its
/// sandbox lets the daemon verify (`SandboxIdentity`: a live Flatpak instance's app id, a snap's
/// AppArmor label). Anything else — a bwrap or other sandbox, a Flatpak claim without its instance,
/// a deleted or replaced binary, a forgery — is an unverified app that shares nothing with any
/// other: its identity names the file it runs, never just the path it claims.
///
/// An interpreter (`python3`, `node`, `sh`, the dynamic loader run directly…) is one executable for
/// every script it runs, and the script is only the client's word (its arguments). It keeps its
/// identity for evaluations, but has no keychain group or keys of its own: one script's secrets
/// would be every other script's. A person who wants a script to keep secrets puts the interpreter
/// in an access group (`lactl keychain share`), and the script names that group. Our own rule:
/// Apple's platforms identify apps by code signature and have no such case.
public struct AppIdentity: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// A verified executable path.
        case app
        /// A verified path of an executable that runs other code (scripts, other binaries).
        case interpreter
        /// An executable the daemon cannot find at the path the client's namespace gives it.
        case unverified
        /// A sandboxed app named by its verified sandbox (`flatpak:APP_ID`, `snap:NAME`).
        case sandboxed
        /// Root, connected to a user-mode daemon that runs as someone else: not an app at all, and
        /// served only what `AdminPolicy.administratorMay` allows.
        case administrator
    }

    /// A file as the kernel identifies it, the same in every mount namespace.
    public struct FileID: Sendable, Hashable {
        public var device: UInt64
        public var inode: UInt64
        public init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }
    }

    /// The identity as stored with items, keys, domain state and audit entries.
    public let name: String
    public let kind: Kind

    public init(name: String, kind: Kind) {
        self.name = name
        self.kind = kind
    }

    public var description: String { name }

    /// The prefix of unverified identities. No access group may be named like an identity (a group
    /// named like an app would hand over that app's items).
    public static let unverifiedPrefix = "unverified:"

    /// The identity of a process running `running`, which its own namespace names `path`; `atPath`
    /// is the file the daemon finds at `path` in its own view (nil: none).
    public static func resolve(path: String, running: FileID, atPath: FileID?) -> AppIdentity {
        guard path.hasPrefix("/"), atPath == running else {
            return AppIdentity(name: "\(unverifiedPrefix)\(running.device):\(running.inode):\(path)", kind: .unverified)
        }
        return AppIdentity(name: path, kind: isInterpreter(path) ? .interpreter : .app)
    }

    /// What the daemon read about a process for being a sandboxed app (nil: no such claim).
    public struct SandboxEvidence: Sendable, Equatable {
        public var flatpak: SandboxIdentity.FlatpakEvidence?
        public var snap: SandboxIdentity.SnapEvidence?
        public init(flatpak: SandboxIdentity.FlatpakEvidence? = nil, snap: SandboxIdentity.SnapEvidence? = nil) {
            self.flatpak = flatpak
            self.snap = snap
        }

        /// The sandboxed app it verifies, if any: a snap before a Flatpak app.
        public var verified: AppIdentity? {
            snap.flatMap(SandboxIdentity.verify) ?? flatpak.flatMap { SandboxIdentity.verify($0).identity }
        }
    }

    /// The identity of a process from all the daemon read about it, in this order: a verified snap
    /// (whose program is a verified path, but one that names a single revision), a verified
    /// Flatpak app, what it runs.
    public static func resolve(path: String, running: FileID, atPath: FileID?, sandbox: SandboxEvidence) -> AppIdentity
    {
        sandbox.verified ?? resolve(path: path, running: running, atPath: atPath)
    }

    /// Root visiting a user-mode daemon (its process is not the daemon's to read, nor needed).
    public static let administrator = AppIdentity(name: "administrator:root", kind: .administrator)

    /// The keychain group and key owner that is the app's own, if it may have one.
    public var ownGroup: String? { kind == .app || kind == .unverified || kind == .sandboxed ? name : nil }

    /// The prefixes no access group may start with: each names identities.
    public static let identityPrefixes = ["/", unverifiedPrefix] + SandboxIdentity.prefixes

    /// Whether `name` can be a member of an access group: an executable's path, or a sandboxed app.
    public static func isMemberName(_ name: String) -> Bool { name.hasPrefix("/") || SandboxIdentity.isName(name) }

    /// Whether `name` has the shape of an app identity, so that no access group may take it.
    public static func isIdentityName(_ name: String) -> Bool {
        identityPrefixes.contains { name.hasPrefix($0) } || name == administrator.name
    }

    /// Executables that run code the kernel does not name: script interpreters and shells, runtimes
    /// of other languages, the dynamic loader run as a program, emulators, and relays that hand any
    /// program's bytes to the socket. Matched on the file name; `*` ends a prefix (`python3.11`).
    public static let interpreters: [String] = [
        "python*", "pypy*", "node", "nodejs", "deno", "bun", "perl*", "ruby*", "irb*", "php*", "lua*", "luajit*",
        "tclsh*", "wish*", "expect", "bash", "sh", "dash", "zsh", "ksh*", "mksh", "yash", "fish", "tcsh", "csh",
        "busybox",
        "java", "jshell", "dotnet", "mono", "Rscript", "R", "julia", "guile*", "gawk", "mawk", "awk", "osh", "elvish",
        "nu",
        "ld-linux*", "ld.so", "ld64.so*", "qemu-*", "gdb", "socat", "nc", "nc.*", "ncat", "netcat", "swift",
        "swift-frontend",
    ]

    public static func isInterpreter(_ path: String) -> Bool {
        let file = path.split(separator: "/").last.map(String.init) ?? path
        return interpreters.contains { pattern in
            pattern.hasSuffix("*") ? file.hasPrefix(pattern.dropLast()) : file == pattern
        }
    }
}
