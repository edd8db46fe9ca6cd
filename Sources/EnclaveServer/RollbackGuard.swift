import Crypto
import EnclaveCore
import Foundation
import GRDB
import Logging
import Synchronization

/// The shell of `RollbackCounter` on a TPM root: at start it holds the state against the TPM's
/// counter (finishing a move a stop interrupted, or refusing a state put back); a user's change
/// that must never roll back is written at the next generation on the user's own actor (so each
/// user's writes keep their order), then `move(to:)` brings the counter there before the answer
/// leaves. Several users' moves may be in flight at once: the counter is only ever moved up to a
/// generation the state has reached, never past it.
final class RollbackGuard: Sendable {
    private let storage: Storage
    private let tcti: String
    private let auth: [UInt8]
    private let anchorKey: SymmetricKey
    private let index: UInt32
    private let logger: Logger

    private struct Standing {
        /// The highest generation the state was written at.
        var written: UInt64
        /// The counter's value as this daemon last moved or read it.
        var known: UInt64
        /// Why passcode checks and biometrics are refused, and whether only root's recovery lifts it.
        var refusal: String?
        var permanent = false
    }

    private let standing: Mutex<Standing>
    /// Moves and reads of the counter, one at a time (they block: on `BlockingWork` only).
    private let counterLock = Mutex(())
    /// The look at the counter under way (`verify`), if any.
    private let looking = Mutex<Task<Void, Never>?>(nil)

    private init(
        storage: Storage,
        tcti: String,
        auth: [UInt8],
        anchorKey: SymmetricKey,
        index: UInt32,
        generation: UInt64,
        refusal: String?,
        logger: Logger
    ) {
        self.storage = storage
        self.tcti = tcti
        self.auth = auth
        self.anchorKey = anchorKey
        self.index = index
        self.logger = logger
        standing = Mutex(Standing(written: generation, known: generation, refusal: refusal, permanent: refusal != nil))
    }

    /// Why passcode checks and biometrics are refused for every user now, nil when they are not.
    var refusal: String? {
        standing.withLock { s in
            s.refusal.map { "\($0): \(s.permanent ? RollbackCounter.recovery : RollbackCounter.untilTheTPMAnswers)" }
        }
    }

    /// Whether the refusal waits for the TPM only: then the next request that reads the facts
    /// looks again (`verify`).
    var refusedUntilTheTPMAnswers: Bool { standing.withLock { $0.refusal != nil && !$0.permanent } }

    // MARK: Start

    /// Holds the state against the TPM's counter at start, defining the counter for a new state.
    /// `reanchor` is root's recovery: the state is taken as it is and bound to a new counter.
    static func open(
        storage: Storage,
        tcti: String,
        auth: [UInt8],
        master: SymmetricKey,
        reanchor: Bool,
        logger: Logger
    ) throws -> RollbackGuard {
        let key = Storage.anchorKey(master: master)
        let (anchor, intact, holdsData) = try storage.pool.read { db in
            let anchor = try Storage.readAnchor(db)
            let intact = try anchor.map { try Storage.anchorIsIntact($0, db, key: key) } ?? false
            // An anchor missing beside data was removed (users deleted with it would leave the
            // items to a passcode set anew).
            let holdsData = try Storage.holdsData(db)
            return (anchor, intact, holdsData)
        }
        func made(_ index: UInt32, _ generation: UInt64, refusal: String? = nil) -> RollbackGuard {
            RollbackGuard(
                storage: storage,
                tcti: tcti,
                auth: auth,
                anchorKey: key,
                index: index,
                generation: generation,
                refusal: refusal,
                logger: logger
            )
        }
        guard let anchor, !reanchor else {
            if anchor == nil && holdsData && !reanchor {
                let why =
                    "this TPM-root state holds data but no rollback anchor (removed, or a state made before the counter existed)"
                logger.error("\(why): \(RollbackCounter.recovery)")
                return made(0, 0, refusal: why)
            }
            // The old counter goes, when it is still this state's (its auth reads it): an index
            // someone else defined since is not ours to delete.
            if let anchor, (try? readCounter(index: anchor.index, auth: auth, tcti: tcti)) ?? nil != nil {
                try TPMDevice.undefineCounter(index: anchor.index, tcti: tcti)
            }
            let counter = try TPMDevice.defineCounter(auth: auth, tcti: tcti)
            try storage.pool.write { db in
                try Storage.writeAnchor(db, key: key, index: counter.index, generation: counter.value)
            }
            if reanchor {
                logger.notice(
                    "root's recovery: this state, as it is, is bound to a new rollback counter",
                    metadata: ["index": "\(String(counter.index, radix: 16))", "generation": "\(counter.value)"]
                )
            }
            return made(counter.index, counter.value)
        }
        let counter = try readCounter(index: anchor.index, auth: auth, tcti: tcti)
        let guardian = made(anchor.index, anchor.generation)
        switch RollbackCounter.standing(generation: anchor.generation, counter: counter, anchorIntact: intact) {
        case .inStep: break
        case .finishMove(let moves):
            logger.notice("finishing \(moves) move(s) of the rollback counter a stop interrupted")
            guardian.standing.withLock { $0.known = counter ?? 0 }
            try guardian.catchUp()
        case .refused(let why):
            logger.error("\(why): \(RollbackCounter.recovery)")
            guardian.standing.withLock {
                $0.refusal = why
                $0.permanent = true
            }
        }
        return guardian
    }

    // MARK: Changes

    /// Writes a user's change inside one durable transaction: at the next generation when
    /// `advancing`, resealing the anchor either way. Returns the generation the counter must reach
    /// before anyone learns of the change (nil: none). Runs on the caller's thread, as every
    /// write of the user's record does. A refused state's anchor is never resealed: it stays
    /// refused through any restart until root's recovery.
    func write(advancing: Bool, _ body: (Database) throws -> Void) throws -> UInt64? {
        let refused = standing.withLock { $0.permanent }
        let moving = advancing && !refused
        let generation = try storage.pool.write { db -> UInt64? in
            try body(db)
            guard !refused, let current = try Storage.readAnchor(db)?.generation else { return nil }
            let next = moving ? current + 1 : current
            try Storage.writeAnchor(db, key: anchorKey, index: index, generation: next)
            return next
        }
        guard moving, let generation else { return nil }
        standing.withLock { $0.written = max($0.written, generation) }
        return generation
    }

    /// Brings the counter to `generation`, durably, before the caller answers. A failure refuses
    /// passcode checks and biometrics until a later check finds the TPM again (`verify`).
    func move(to generation: UInt64) async throws {
        try await BlockingWork.tpm { [self] in try catchUp(to: generation) }
    }

    /// Before a passcode check: the TPM still agrees (the counter neither moved by someone else nor
    /// deleted), and a move that failed is finished. Returns the refusal, nil when checks may go on.
    /// One look at a time, whoever asks: while the TPM is refused, every evaluation of every user
    /// asks (`UserSession.facts`), and each would otherwise queue a read of its own on the TPM's one
    /// thread; callers that arrive while a look runs share its outcome.
    func verify() async -> String? {
        if standing.withLock({ $0.permanent }) { return refusal }
        let look = looking.withLock { current -> Task<Void, Never> in
            if let current { return current }
            let made = Task { [self] in
                await lookAtTheCounter()
                looking.withLock { $0 = nil }
            }
            current = made
            return made
        }
        await look.value
        return refusal
    }

    private func lookAtTheCounter() async {
        do {
            try await BlockingWork.tpm { [self] in
                try counterLock.withLock { _ in
                    let value = try Self.readCounter(index: index, auth: auth, tcti: tcti)
                    let (known, written) = standing.withLock { ($0.known, $0.written) }
                    guard let value, value >= known, value <= written else {
                        refuse(
                            value == nil
                                ? "the TPM's rollback counter for this state was deleted while the daemon ran"
                                : "the TPM's rollback counter was moved by someone else (\(known) → \(value ?? 0))",
                            permanently: true
                        )
                        return
                    }
                    // Up to the state's generation is this daemon's own progress (a move whose
                    // answer was lost, with its read-back).
                    standing.withLock { $0.known = value }
                    if value < written { try catchUpLocked(to: written) }
                    standing.withLock { if !$0.permanent { $0.refusal = nil } }
                }
            }
        } catch {
            // Unread, the counter vouches for nothing: no check goes on without it.
            refuse("the TPM's rollback counter could not be read or brought up to date (\(error))", permanently: false)
        }
    }

    /// The counter's value, nil when its index is gone.
    private static func readCounter(index: UInt32, auth: [UInt8], tcti: String) throws(DaemonError) -> UInt64? {
        do throws(DaemonError) {
            return try TPMDevice.readCounter(index: index, auth: auth, tcti: tcti)
        } catch {
            guard error.tpmObjectMissing else { throw error }
            return nil
        }
    }

    private func catchUp(to generation: UInt64? = nil) throws {
        try counterLock.withLock { _ in
            try catchUpLocked(to: generation ?? standing.withLock { $0.written })
        }
    }

    private func catchUpLocked(to generation: UInt64) throws {
        while standing.withLock({ $0.known }) < generation {
            let before = standing.withLock { $0.known }
            let value: UInt64
            do { value = try TPMDevice.incrementCounter(index: index, auth: auth, tcti: tcti) } catch {
                // The increment may have run with its answer lost: the counter says where it is.
                // Anywhere up to the state's generation is this daemon's own progress.
                let written = standing.withLock { $0.written }
                if let now = try? Self.readCounter(index: index, auth: auth, tcti: tcti), now > before, now <= written {
                    standing.withLock { $0.known = now }
                    continue
                }
                refuse("the TPM's rollback counter could not be moved (\(error))", permanently: false)
                throw DaemonError(.rollbackCounterNotMoved, "the TPM's rollback counter could not be moved: \(error)")
            }
            // Past the state's generation only someone else could have moved it (an answer lost
            // earlier makes it more than one ahead of what was known, never past the state).
            guard value > before, value <= standing.withLock({ $0.written }) else {
                refuse("the TPM's rollback counter was moved by someone else (\(before) → \(value))", permanently: true)
                throw DaemonError(
                    .rollbackCounterNotMoved,
                    "the TPM's rollback counter could not be moved: the counter was moved by someone else"
                )
            }
            standing.withLock { $0.known = value }
        }
    }

    private func refuse(_ why: String, permanently: Bool) {
        logger.error("\(why): \(permanently ? RollbackCounter.recovery : RollbackCounter.untilTheTPMAnswers)")
        standing.withLock {
            guard !$0.permanent else { return }
            $0.refusal = why
            $0.permanent = permanently
        }
    }
}
