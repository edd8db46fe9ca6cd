import Foundation

/// A sandboxed app's identity, decided from what its sandbox lets the daemon verify — the rules,
/// apart from the reading (`SandboxEvidenceReader` gathers the facts when a client is pinned).
///
/// - **Flatpak.** Every Flatpak app runs `/app/bin/…` or a runtime's program in a mount namespace of
///   its own, so its executable never verifies (`AppIdentity.resolve`). What names it is
///   `/.flatpak-info` in its root — but any process can make a mount namespace with such a file
///   (`unshare`, `bwrap`). So, as xdg-desktop-portal does, the claim counts only together with the
///   record flatpak keeps for each running instance in the user's runtime directory
///   (`$XDG_RUNTIME_DIR/.flatpak/INSTANCE/`: `info`, the very bytes of that `/.flatpak-info`, and
///   `bwrapinfo.json`, which names the sandbox's first process) — and, our own stricter rule, only
///   when that process is alive, the user's, and in the client's own mount namespace: a forged file
///   naming another instance, live or gone, verifies nothing.
/// - **Snap.** A snap's program is a verified path that changes with every revision, so a snap is
///   named by its AppArmor label (`snap.NAME.APP (enforce)`), which a confined snap cannot change.
///   The label alone proves nothing: AppArmor lets every unconfined process — a Flatpak app
///   included — change to any loaded profile, and the socket's label (`SO_PEERSEC`) is then that
///   profile's. So the label counts only from a process in the mount namespace snap-confine made
///   for that snap, which snapd keeps at `/run/snapd/ns/NAME.mnt` (per user:
///   `NAME.UID.mnt`) and no user can enter without snap-confine. Only enforce mode counts: a
///   snap in devmode (`complain`) is not confined, and could take any label.
///
/// What neither rule stops, as on every Linux desktop: a program of the same user *outside* any
/// sandbox can start a Flatpak app's or a snap's sandbox with its own command (`flatpak run
/// --command=…`, `snap run --shell`), or write the instance record itself. The sandboxes protect
/// apps from one another, not from the person's own unconfined programs.
public enum SandboxIdentity {
    /// The identity prefix of verified Flatpak apps (`flatpak:org.example.App`).
    public static let flatpakPrefix = "flatpak:"
    /// The identity prefix of verified snaps (`snap:NAME`, with its instance key: `snap:NAME_KEY`).
    public static let snapPrefix = "snap:"
    /// Every prefix of a sandboxed app's name.
    public static let prefixes = [flatpakPrefix, snapPrefix]

    /// Whether `name` is a well-formed sandboxed app's name (`flatpak:APP_ID`, `snap:NAME[_KEY]`).
    public static func isName(_ name: String) -> Bool {
        if name.hasPrefix(flatpakPrefix) {
            return FlatpakInfo.isValidAppID(String(name.dropFirst(flatpakPrefix.count)))
        }
        if name.hasPrefix(snapPrefix) { return isValidSnapInstance(name.dropFirst(snapPrefix.count)) }
        return false
    }

    // MARK: Flatpak

    /// What `/.flatpak-info` says about the app, as flatpak writes it (a key file).
    public struct FlatpakInfo: Sendable, Equatable {
        public var appID: String
        public var instanceID: String

        public init(appID: String, instanceID: String) {
            self.appID = appID
            self.instanceID = instanceID
        }

        /// The largest `/.flatpak-info` read (flatpak's are under 2 KiB).
        public static let maximumSize = 64 * 1024

        /// Parses the key file; nil for anything but an app's info with a well-formed app id and
        /// instance id (a runtime run on its own names no app). Strict: a key given twice, or a
        /// line that is neither a group, a key, a comment nor blank, rejects the file.
        public static func parse(_ bytes: [UInt8]) -> FlatpakInfo? {
            guard bytes.count <= maximumSize, let text = String(validating: bytes, as: UTF8.self) else { return nil }
            var group = ""
            var values: [String: String] = [:]
            for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let line = raw.trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") { continue }
                if line.hasPrefix("[") {
                    guard line.hasSuffix("]"), line.count > 2 else { return nil }
                    group = String(line.dropFirst().dropLast())
                    continue
                }
                guard let equals = line.firstIndex(of: "="), !group.isEmpty else { return nil }
                let key = "\(group)/\(line[..<equals].trimmingCharacters(in: .whitespaces))"
                guard
                    values.updateValue(
                        line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces),
                        forKey: key
                    ) == nil
                else { return nil }
            }
            guard values["Runtime/name"] == nil, let appID = values["Application/name"],
                let instanceID = values["Instance/instance-id"],
                isValidAppID(appID), isValidInstanceID(instanceID)
            else { return nil }
            return FlatpakInfo(appID: appID, instanceID: instanceID)
        }

        /// Flatpak's rule for app ids: 3 or more dot-separated elements of ASCII letters, digits and
        /// `_`, none starting with a digit, `-` only in the last; at most 255 bytes.
        public static func isValidAppID(_ id: String) -> Bool {
            let elements = id.split(separator: ".", omittingEmptySubsequences: false)
            guard id.utf8.count <= 255, elements.count >= 3 else { return false }
            for (index, element) in elements.enumerated() {
                guard let first = element.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
                let last = index == elements.count - 1
                guard
                    element.unicodeScalars.allSatisfy({
                        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_" || (last && $0 == "-"))
                    })
                else {
                    return false
                }
            }
            return true
        }

        /// Flatpak's instance ids are decimal numbers; anything else could name another path.
        public static func isValidInstanceID(_ id: String) -> Bool {
            (1...20).contains(id.utf8.count)
                && id.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }
    }

    /// One line of `/proc/PID/mountinfo`: the mount's id, its mount point (octal escapes such as
    /// `\040` decoded) and its file system type; nil for a malformed line.
    public static func mount(_ line: Substring) -> (id: Int, point: String, type: String)? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count >= 10, let id = Int(fields[0]), let separator = fields.firstIndex(of: "-"), separator >= 6,
            separator + 1 < fields.count
        else { return nil }
        return (id, unescape(fields[4]), String(fields[separator + 1]))
    }

    /// The file systems a claim (`/.flatpak-info`) is read from: tmpfs only, as bubblewrap (so
    /// flatpak) makes the root and that file. Anything else — FUSE, overlayfs over anything, a
    /// network file system — could make the daemon's read wait for as long as a program likes.
    public static func mayReadClaim(on type: String) -> Bool { type == "tmpfs" }

    /// The file systems the instance record (the user's runtime directory) is read from: local
    /// ones, which no program of the user's answers for (not FUSE, which fusermount lets a user
    /// put on any directory of theirs, nor a network file system).
    public static func mayReadRecord(on type: String) -> Bool { localFileSystems.contains(type) }

    public static let localFileSystems: Set<String> = [
        "tmpfs", "ramfs", "ext4", "ext3", "ext2", "xfs", "btrfs", "f2fs", "jfs", "bcachefs", "zfs",
    ]

    private static func unescape(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        var rest = Array(field.utf8)[...]
        while let byte = rest.first {
            if byte == UInt8(ascii: "\\"), rest.count >= 4,
                let value = UInt8(String(decoding: rest.dropFirst().prefix(3), as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                rest = rest.dropFirst(4)
            } else {
                bytes.append(byte)
                rest = rest.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The first process of an instance's sandbox, from `bwrapinfo.json` (bubblewrap's `--info-fd`).
    public static func sandboxProcess(bwrapInfo bytes: [UInt8]) -> Int32? {
        struct BwrapInfo: Decodable {
            var childPid: Int32
            enum CodingKeys: String, CodingKey { case childPid = "child-pid" }
        }
        guard bytes.count <= 4096, let info = try? JSONDecoder().decode(BwrapInfo.self, from: Data(bytes)),
            info.childPid > 1
        else { return nil }
        return info.childPid
    }

    /// Everything the daemon read about a client that has a `/.flatpak-info`, at the moment it was
    /// pinned.
    public struct FlatpakEvidence: Sendable, Equatable {
        /// The client's uid, and its mount namespace (the device and inode of `/proc/PID/ns/mnt`).
        public var clientUser: UInt32
        public var clientNamespace: AppIdentity.FileID
        /// `/.flatpak-info` in the client's root.
        public var info: [UInt8]
        /// The instance record that file names (nil: there is none).
        public var record: InstanceRecord?

        public struct InstanceRecord: Sendable, Equatable {
            /// The owner of `$XDG_RUNTIME_DIR/.flatpak/INSTANCE`.
            public var owner: UInt32
            /// Its `info` file.
            public var info: [UInt8]
            /// The process its `bwrapinfo.json` names, if it is alive: its uid and mount namespace.
            public var sandboxProcess: (owner: UInt32, namespace: AppIdentity.FileID)?

            public init(owner: UInt32, info: [UInt8], sandboxProcess: (owner: UInt32, namespace: AppIdentity.FileID)?) {
                self.owner = owner
                self.info = info
                self.sandboxProcess = sandboxProcess
            }

            public static func == (a: InstanceRecord, b: InstanceRecord) -> Bool {
                a.owner == b.owner && a.info == b.info && a.sandboxProcess?.owner == b.sandboxProcess?.owner
                    && a.sandboxProcess?.namespace == b.sandboxProcess?.namespace
            }
        }

        public init(clientUser: UInt32, clientNamespace: AppIdentity.FileID, info: [UInt8], record: InstanceRecord?) {
            self.clientUser = clientUser
            self.clientNamespace = clientNamespace
            self.info = info
            self.record = record
        }
    }

    /// Why a Flatpak claim was not believed (for the log), or the app it verified.
    public enum FlatpakVerdict: Sendable, Equatable {
        case verified(AppIdentity)
        case malformedInfo
        case noInstanceRecord
        case recordNotTheUsers
        case recordDiffers
        case instanceEnded
        case otherNamespace

        public var identity: AppIdentity? {
            if case .verified(let identity) = self { return identity }
            return nil
        }
    }

    public static func verify(_ evidence: FlatpakEvidence) -> FlatpakVerdict {
        guard let info = FlatpakInfo.parse(evidence.info) else { return .malformedInfo }
        guard let record = evidence.record else { return .noInstanceRecord }
        guard record.owner == evidence.clientUser else { return .recordNotTheUsers }
        guard record.info == evidence.info else { return .recordDiffers }
        guard let process = record.sandboxProcess, process.owner == evidence.clientUser else { return .instanceEnded }
        guard process.namespace == evidence.clientNamespace else { return .otherNamespace }
        return .verified(AppIdentity(name: flatpakPrefix + info.appID, kind: .sandboxed))
    }

    // MARK: Snap

    /// What the daemon read about a client for being a snap, when it was pinned.
    public struct SnapEvidence: Sendable, Equatable {
        /// Its AppArmor label (`/proc/PID/attr/apparmor/current`).
        public var label: String
        /// Its mount namespace.
        public var clientNamespace: AppIdentity.FileID
        /// The namespaces snapd keeps for the snap the label names (`snapNamespacePaths`), as found.
        public var snapNamespaces: [AppIdentity.FileID]

        public init(label: String, clientNamespace: AppIdentity.FileID, snapNamespaces: [AppIdentity.FileID]) {
            self.label = label
            self.clientNamespace = clientNamespace
            self.snapNamespaces = snapNamespaces
        }
    }

    /// Where snapd keeps the mount namespaces of the snap instance `instance` (`NAME` or
    /// `NAME_KEY`): the snap's, and the per-user one for `user` (snap-confine's `NAME.UID.mnt`).
    public static func snapNamespacePaths(instance: String, user: UInt32) -> [String] {
        ["/run/snapd/ns/\(instance).mnt", "/run/snapd/ns/\(instance).\(user).mnt"]
    }

    /// The snap the evidence names: an enforced snap label, from inside that snap's namespace.
    public static func verify(_ evidence: SnapEvidence) -> AppIdentity? {
        guard let identity = snap(label: evidence.label), evidence.snapNamespaces.contains(evidence.clientNamespace)
        else { return nil }
        return identity
    }

    /// The snap an AppArmor label names: `snap.NAME.APP (enforce)` or
    /// `snap.NAME.hook.HOOK (enforce)`, NAME with its instance key if it has one (`NAME_KEY`: a
    /// parallel install, with data of its own). Nil for every other label, for modes other than
    /// enforce, and for stacked or nested labels (`//`).
    public static func snap(label: String) -> AppIdentity? {
        let suffix = " (enforce)"
        var text = label
        while text.last == "\0" || text.last == "\n" { text.removeLast() }
        guard text.hasSuffix(suffix), !text.contains("//") else { return nil }
        let parts = text.dropLast(suffix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0] == "snap" else { return nil }
        let hook = parts.count == 4 && parts[2] == "hook"
        guard parts.count == 3 || hook else { return nil }
        guard isValidSnapInstance(parts[1]), isValidSnapApp(parts[parts.count - 1]) else { return nil }
        return AppIdentity(name: snapPrefix + parts[1], kind: .sandboxed)
    }

    /// A snap instance: its name, with its instance key if it has one (`NAME_KEY`).
    static func isValidSnapInstance(_ instance: Substring) -> Bool {
        let parts = instance.split(separator: "_", omittingEmptySubsequences: false)
        return (1...2).contains(parts.count) && isValidSnapName(parts[0])
            && (parts.count == 1 || isValidInstanceKey(parts[1]))
    }

    /// snapd's rule for snap names: 2–40 of `a-z`, `0-9` and `-`, at least one letter, no `-` at
    /// either end or twice in a row.
    static func isValidSnapName(_ name: Substring) -> Bool {
        let bytes = Array(name.utf8)
        guard (2...40).contains(bytes.count), bytes.first != UInt8(ascii: "-"), bytes.last != UInt8(ascii: "-"),
            !name.contains("--"), bytes.contains(where: isLowercaseLetter)
        else { return false }
        return bytes.allSatisfy { isLowercaseLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") }
    }

    /// An instance key: 1–10 of `a-z` and `0-9`.
    static func isValidInstanceKey(_ key: Substring) -> Bool {
        (1...10).contains(key.utf8.count) && key.utf8.allSatisfy { isLowercaseLetter($0) || isDigit($0) }
    }

    /// An app or hook name: ASCII letters, digits and `-`, not starting or ending with `-`, never
    /// two in a row.
    static func isValidSnapApp(_ app: Substring) -> Bool {
        guard let first = app.utf8.first, let last = app.utf8.last, first != UInt8(ascii: "-"),
            last != UInt8(ascii: "-"),
            !app.contains("--")
        else { return false }
        return app.utf8.allSatisfy {
            isLowercaseLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-")
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
        }
    }

    private static func isLowercaseLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
    }
    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
}
