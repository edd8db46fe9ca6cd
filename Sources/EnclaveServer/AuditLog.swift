import EnclaveProtocol
import Foundation
import Logging
import Synchronization

/// The audit log's writer. An entry that goes with a change of the user's record is written in
/// the record's own transaction (`Storage.save(_:audit:)`); every other entry (a read, an
/// evaluation that changed no counter, a keychain write whose item is already durable) waits here
/// and is written with the others of the same moment in one transaction (group commit), off the
/// caller's thread. The price: on power loss or SIGKILL, entries of the last `interval` may be
/// lost — never a counter, never an item. Reading the log writes what waits first.
final class AuditLog: Sendable {
    static let interval: TimeInterval = 0.02
    /// Written at once past this many waiting entries.
    static let batchLimit = 512

    private let storage: Storage
    private let logger: Logger
    private struct Waiting {
        var entries: [AuditEntry] = []
        /// Whether a write is scheduled for them.
        var scheduled = false
    }
    private let waiting = Mutex(Waiting())
    /// One writer at a time, so entries reach the table in the order they were appended.
    private let writer = DispatchQueue(label: "laenclaved.audit", qos: .utility)

    init(storage: Storage, logger: Logger) {
        self.storage = storage
        self.logger = logger
    }

    func append(_ entry: AuditEntry) {
        enum Next { case nothing, later, now }
        let next: Next = waiting.withLock { waiting in
            waiting.entries.append(entry)
            if waiting.entries.count == Self.batchLimit { return .now }
            if waiting.scheduled { return .nothing }
            waiting.scheduled = true
            return .later
        }
        switch next {
        case .nothing: return
        case .later: writer.asyncAfter(deadline: .now() + Self.interval) { self.writePending() }
        case .now: writer.async { self.writePending() }
        }
    }

    /// Writes whatever waits, and returns when it is durable.
    func flush() { writer.sync { writePending() } }

    /// The newest entries first, including those still waiting; `uid` nil means every user, `app` nil every app.
    func read(uid: UInt32?, app: String?, limit: Int) throws -> [AuditEntry] {
        flush()
        return try storage.audit(uid: uid, app: app, limit: limit)
    }

    private func writePending() {
        let batch: [AuditEntry] = waiting.withLock { waiting in
            waiting.scheduled = false
            defer { waiting.entries.removeAll(keepingCapacity: true) }
            return waiting.entries
        }
        guard !batch.isEmpty else { return }
        do { try storage.appendAudit(batch) } catch {
            logger.error("could not write the audit log", metadata: ["entries": "\(batch.count)", "error": "\(error)"])
        }
    }
}
