import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// CPU time a process has used so far, every thread together — those that ended too — from the
/// kernel's process CPU clock (`clock_getcpuclockid`), current to the moment it is read.
enum CPUTime {
    /// Seconds, or nil when the process's clock cannot be read.
    static func seconds(of pid: pid_t) -> Double? {
        var clock = clockid_t()
        guard clock_getcpuclockid(pid, &clock) == 0 else { return nil }
        var time = timespec()
        guard clock_gettime(clock, &time) == 0 else { return nil }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// `body`'s result, and its CPU cost per operation in each process, in seconds (nil where a
    /// clock could not be read): `operations` done while it ran.
    static func perOperation<Result: Sendable>(
        _ operations: Int,
        processes: [pid_t],
        _ body: @Sendable () async throws -> Result
    ) async rethrows -> (result: Result, cost: [Double?]) {
        let before = processes.map(seconds(of:))
        let result = try await body()
        return (result, cost(operations, processes: processes, since: before))
    }

    /// The same for a body that blocks its thread.
    static func perOperationBlocking<Result>(
        _ operations: Int,
        processes: [pid_t],
        _ body: () throws -> Result
    ) rethrows -> (result: Result, cost: [Double?]) {
        let before = processes.map(seconds(of:))
        let result = try body()
        return (result, cost(operations, processes: processes, since: before))
    }

    /// Each process's CPU per operation since `before` (`processes` read then).
    static func cost(_ operations: Int, processes: [pid_t], since before: [Double?]) -> [Double?] {
        zip(processes.map(seconds(of:)), before).map { after, before in
            guard let after, let before else { return nil }
            return (after - before) / Double(max(1, operations))
        }
    }
}
