import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Who looks at a PAM request's terminal through a terminal multiplexer: sudo run in a tmux or
/// screen pane is typed by whoever is attached to that server, and a server started at the seat
/// may be attached over SSH too. Read from what the kernel keeps of each process, all of it
/// readable by any user (the daemon's own user included): the parent chain (`/proc/PID/stat`) up
/// to the nearest multiplexer server — the pane's shell is its child — the name the kernel keeps
/// for each process (`comm`: tmux names its server "tmux: server" and its clients "tmux: client";
/// screen's are all "screen"), its owner, and the cgroup each client's session is read from. Each
/// client attached is then looked at the same way, in case it runs inside another multiplexer.
///
/// Our limits: names are the processes' own (a process of the user's can rename itself, or
/// leave the parent chain by re-parenting), so this tells where the person is, not where an
/// attacker with the user's account is; every client of a user's servers of that kind counts,
/// not only the pane's server's (one tmux attached over SSH takes the finger from the user's
/// other tmux servers too: the safe way round); and under `hidepid` the daemon sees no other
/// user's processes at all.
enum TerminalMultiplexers {
    /// The places of the clients of the multiplexers the process `pid` runs under (empty: none).
    /// `place`: where a process stands, from its cgroup's text. Blocking: a few small /proc reads
    /// per process on the machine, only when a multiplexer is found.
    static func clientPlaces(
        of pid: Int32,
        proc: String = "/proc",
        place: (String) -> PAMAuthenticationRules.Place
    ) -> [PAMAuthenticationRules.Place] {
        var seen: Set<Int32> = []
        return clientPlaces(of: pid, proc: proc, depth: 3, seen: &seen, place: place)
    }

    private enum Kind {
        case tmux, screen

        init?(comm: String) {
            switch comm {
            case "tmux: server": self = .tmux
            case "screen": self = .screen
            default: return nil
            }
        }

        func isClient(comm: String) -> Bool {
            switch self {
            case .tmux: comm == "tmux: client"
            case .screen: comm == "screen"
            }
        }
    }

    private static func clientPlaces(
        of pid: Int32,
        proc: String,
        depth: Int,
        seen: inout Set<Int32>,
        place: (String) -> PAMAuthenticationRules.Place
    ) -> [PAMAuthenticationRules.Place] {
        guard let (server, kind) = nearestServer(above: pid, proc: proc), seen.insert(server).inserted else {
            return []
        }
        // Nested deeper than a person nests multiplexers: no one can say where they sit.
        guard depth > 0 else { return [.unknown] }
        guard let owner = owner(of: server, proc: proc) else { return [.unknown] }
        var places: [PAMAuthenticationRules.Place] = []
        for client in processes(proc: proc) where client != server && owner == Self.owner(of: client, proc: proc) {
            guard let comm = text(proc, client, "comm").map(trimmed), kind.isClient(comm: comm),
                // A client that has ended and is not yet reaped is attached to nothing.
                let stat = text(proc, client, "stat"), !isDead(stat: stat)
            else { continue }
            places.append(text(proc, client, "cgroup").map(place) ?? .unknown)
            places += clientPlaces(of: client, proc: proc, depth: depth - 1, seen: &seen, place: place)
        }
        return places
    }

    /// The nearest ancestor of `pid` that is a multiplexer's server (at most 64 steps up).
    private static func nearestServer(above pid: Int32, proc: String) -> (Int32, Kind)? {
        var current = pid
        for _ in 0..<64 {
            guard let stat = text(proc, current, "stat"), let parent = parentPID(stat: stat), parent > 1 else {
                return nil
            }
            if let comm = text(proc, parent, "comm").map(trimmed), let kind = Kind(comm: comm) { return (parent, kind) }
            current = parent
        }
        return nil
    }

    /// `ppid` in the text of /proc/PID/stat (after the command, which may hold spaces and parentheses).
    static func parentPID(stat text: String) -> Int32? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    /// Whether /proc/PID/stat's state says the process has ended (a zombie, or dead).
    static func isDead(stat text: String) -> Bool {
        guard let close = text.lastIndex(of: ")") else { return true }
        let state = text[text.index(after: close)...].split(separator: " ").first
        return state == "Z" || state == "X" || state == "x"
    }

    private static func owner(of pid: Int32, proc: String) -> uid_t? {
        var status = stat()
        return stat("\(proc)/\(pid)", &status) == 0 ? status.st_uid : nil
    }

    private static func processes(proc: String) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: proc)) ?? []).compactMap { Int32($0) }
    }

    /// Opened without waiting: a process may hold a lease on its own /proc files, and one user's
    /// process must not hold another user's sudo for the lease's 45 s.
    private static func text(_ proc: String, _ pid: Int32, _ file: String) -> String? {
        PeerProcess.procFile(AT_FDCWD, "\(proc)/\(pid)/\(file)").map { String(decoding: $0, as: UTF8.self) }
    }

    private static func trimmed(_ text: String) -> String { text.trimmingCharacters(in: .newlines) }
}
