import Foundation

/// CPU time a process has used so far, every thread together, from the scheduler's own count
/// (`/proc/PID/task/*/schedstat`, nanoseconds): fine enough for runs of a fraction of a second,
/// where `/proc/PID/stat`'s clock ticks are not.
enum CPUTime {
    static func seconds(of pid: pid_t) -> Double {
        let tasks = "/proc/\(pid)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return 0 }
        var nanoseconds: UInt64 = 0
        for thread in threads {
            guard let line = try? String(contentsOfFile: "\(tasks)/\(thread)/schedstat", encoding: .utf8),
                  let first = line.split(separator: " ").first, let value = UInt64(first) else { continue }
            nanoseconds += value
        }
        return Double(nanoseconds) / 1e9
    }

    /// `body`'s CPU cost per operation in each process, in seconds: `operations` done while it ran.
    static func perOperation(_ operations: Int, processes: [pid_t], _ body: @Sendable () async throws -> Void) async rethrows -> [Double] {
        let before = processes.map(seconds(of:))
        try await body()
        return zip(processes.map(seconds(of:)), before).map { ($0 - $1) / Double(max(1, operations)) }
    }
}
