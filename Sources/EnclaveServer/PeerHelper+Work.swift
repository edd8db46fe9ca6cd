import EnclaveCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the helper's pool threads do (`PeerHelper.serve`), and the table of pinned processes they
/// share with its loop.
extension PeerHelper {
    /// The processes the helper has pinned, by handle; touched by the loop and the pool's threads.
    final class PinnedProcesses: Sendable {
        private struct Table {
            var processes: [UInt64: PeerProcess] = [:]
            var next: UInt64 = 1
        }
        private let table = Mutex(Table())

        func add(_ process: PeerProcess) -> UInt64 {
            table.withLock { table in
                defer { table.next += 1 }
                table.processes[table.next] = process
                return table.next
            }
        }

        /// Unknown handles count as changed: the connection ends rather than goes on unchecked.
        func executableChanged(_ handle: UInt64) -> Bool {
            table.withLock { $0.processes[handle] }?.executableChanged() ?? true
        }

        /// The process (and its pinned directory's descriptor) is let go of outside the lock.
        func forget(_ handle: UInt64) {
            _ = table.withLock { $0.processes.removeValue(forKey: handle) }
        }
    }

    static func pin(
        pid: Int32,
        pidfd: Int32?,
        cookie: UInt64,
        sequence: UInt64,
        into pinned: PinnedProcesses
    ) -> [UInt8] {
        do throws(PeerProcess.Refusal) {
            let process = try PeerProcess(pid: pid, pidfd: pidfd)
            try process.confirmHolds(connectionCookie: cookie)
            let identity = process.identity
            guard identity.name.utf8.count <= maxName, (process.session?.utf8.count ?? 0) <= maxSession else {
                return answer(sequence: sequence, status: .tooLong)
            }
            return answer(
                sequence: sequence,
                status: .ok,
                handle: pinned.add(process),
                identity: identity,
                session: process.session
            )
        } catch {
            let (status, code) = Self.code(of: error)
            return answer(sequence: sequence, status: status, errno: code)
        }
    }

    static func holders(index handle: UInt64, only pid: Int32, sequence: UInt64) -> [UInt8] {
        guard let index = UInt32(exactly: handle) else {
            return answer(sequence: sequence, status: .badRequest)
        }
        // Bounded (`PtyMasterHolders.budget`): a pool's thread is never held for long.
        guard let holders = PtyMasterHolders.scan(index: index, only: pid > 0 ? pid : nil) else {
            return answer(sequence: sequence, status: .outOfTime)
        }
        guard let records = records(of: holders) else {
            return answer(sequence: sequence, status: .tooLong)
        }
        return answer(sequence: sequence, status: .ok, payload: records)
    }
}
