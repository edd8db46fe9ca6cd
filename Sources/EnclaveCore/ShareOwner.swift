/// Whose share of the daemon a client's connection takes — its place in the connection budget
/// (`ConnectionBudget`), its pins' and its handed descriptors' turns (`TurnsPerUser`): the account
/// behind the connection's uid, so that no one person holds the shares of many.
/// - A uid of another account's subordinate range (`SubordinateIDs`, /etc/subuid: what
///   `newuidmap` lets that account's user namespaces run as) is that account's: a user with
///   65,536 such uids would otherwise take the shares of 65,536 people, and fill the daemon's
///   whole connection budget alone.
/// - Root is the user logged in who started the process (`/proc/PID/loginuid`, which no setuid
///   changes), when one is set: `su`, `sudo` and other setuid programs every user runs would
///   otherwise share root's one share, and one user's could use up everyone's. Unset
///   (`UInt32.max`: a service, a machine without login auditing): root's own.
/// - Anyone else is their uid.
public enum ShareOwner {
    public static func of(uid: UInt32, loginUID: UInt32?, subordinates: SubordinateIDs = SubordinateIDs()) -> UInt32 {
        if let owner = subordinates.owner(of: uid) { return owner }
        guard uid == 0, let loginUID, loginUID != UInt32.max else { return uid }
        return loginUID
    }
}

/// The uid ranges accounts may map in the user namespaces they make (subuid(5): one
/// `OWNER:FIRST:COUNT` a line, OWNER a login name or a uid). Our choices:
/// - A range root owns is root's to hand to the containers it runs (LXD, Incus:
///   `root:1000000:1000000000`, 65,536 uids a container): never root's share, and not one share
///   a uid either (one container could then take as many shares as it has uids), but one share
///   for each block of 65,536 (`containerBlock`), named by its first uid.
/// - A line that does not parse, an owner that names no account, or a range that runs past the
///   last uid is left out; a uid in two ranges is the first one's.
public struct SubordinateIDs: Sendable, Equatable {
    public struct Range: Sendable, Equatable {
        public let owner: UInt32
        public let first: UInt32
        public let count: UInt32

        public init(owner: UInt32, first: UInt32, count: UInt32) {
            self.owner = owner
            self.first = first
            self.count = count
        }

        public func holds(_ uid: UInt32) -> Bool { uid >= first && uid - first < count }
    }

    public let ranges: [Range]

    public init(ranges: [Range] = []) { self.ranges = ranges }

    /// `text` as subuid(5) writes it; `uidOf` names an account's uid (getpwnam).
    public init(parsing text: Substring, uidOf: (String) -> UInt32?) {
        var ranges: [Range] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 3, !fields[0].isEmpty, let first = UInt32(fields[1]), let count = UInt32(fields[2]),
                count > 0, UInt64(first) + UInt64(count) <= UInt64(UInt32.max)
            else { continue }
            let name = String(fields[0])
            guard let owner = UInt32(name) ?? uidOf(name) else { continue }
            ranges.append(Range(owner: owner, first: first, count: count))
        }
        self.init(ranges: ranges)
    }

    /// What a root-owned range is cut into: one container's uids, as LXD and Incus give them.
    public static let containerBlock: UInt32 = 65_536

    /// The share a range holds `uid` for, if one does: its owner's, or in a range root owns, the
    /// first uid of `uid`'s block.
    public func owner(of uid: UInt32) -> UInt32? {
        guard let range = ranges.first(where: { $0.holds(uid) }) else { return nil }
        guard range.owner == 0 else { return range.owner }
        return range.first + (uid - range.first) / Self.containerBlock * Self.containerBlock
    }
}
