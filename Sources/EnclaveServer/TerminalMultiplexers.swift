import EnclaveCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The /proc reads behind `TerminalMultiplexerClients`: each process's `stat` (its parent, name,
/// state and terminal), the real uid from `status` for the few that bear a multiplexer's name,
/// all of it readable by any user and opened without waiting (a process may hold a lease on its
/// own /proc files, and one user's process must not hold another user's sudo for the lease's
/// 45 s). Listing every process (with those uids) happens once per request, only once a
/// multiplexer server is above it, and within `budget`: past it, no one can say where the person
/// is, and no finger is offered.
enum TerminalMultiplexers {
    static let budget: Duration = .milliseconds(250)

    /// Blocking: run it on `BlockingWork`.
    static func clientPlaces(
        of pid: Int32,
        proc: String = "/proc",
        budget: Duration = budget,
        place: (String) -> PAMAuthenticationRules.Place
    ) -> [PAMAuthenticationRules.Place] {
        TerminalMultiplexerClients.places(
            of: pid,
            process: { process($0, proc: proc) },
            everyProcess: { everyProcess(proc: proc, until: ContinuousClock.now + budget) },
            uid: { realUID($0, proc: proc) },
            place: { PeerProcess.procText($0, "cgroup", proc: proc).map(place) ?? .unknown }
        )
    }

    private static func process(_ pid: Int32, proc: String) -> TerminalMultiplexerClients.Process? {
        PeerProcess.procText(pid, "stat", proc: proc).flatMap { TerminalMultiplexerClients.Process(stat: $0) }
    }

    private static func everyProcess(
        proc: String,
        until deadline: ContinuousClock.Instant
    ) -> [TerminalMultiplexerClients.Process]? {
        guard let stream = opendir(proc) else { return nil }
        defer { closedir(stream) }
        var processes: [TerminalMultiplexerClients.Process] = []
        while let entry = readdir(stream) {
            guard ContinuousClock.now < deadline else { return nil }
            let name = PeerProcess.entryName(entry)
            guard let pid = Int32(name), var process = process(pid, proc: proc) else { continue }
            if process.bearsAMultiplexersName { process.uid = realUID(pid, proc: proc) }
            processes.append(process)
        }
        return processes
    }

    /// The real uid (`Uid:`'s first value in /proc/PID/status): the owner of /proc/PID itself is
    /// root for any process that is not dumpable.
    private static func realUID(_ pid: Int32, proc: String) -> UInt32? {
        guard let status = PeerProcess.procText(pid, "status", proc: proc) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            return line.dropFirst("Uid:".count).split(whereSeparator: { $0 == "\t" || $0 == " " }).first
                .flatMap { UInt32($0) }
        }
        return nil
    }
}
