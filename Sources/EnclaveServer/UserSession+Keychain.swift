import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// A protected keychain call between reading its candidates and answering: the connection proves
/// what `proofs` asks on the request's context, then `keychainFinish` opens what was accepted.
struct PendingKeychain: Sendable {
    let operation: KeychainOperation
    let request: KeychainRequest
    var proofs: AccessProofs<StoredItem>
    /// An update's changes, checked before anyone is asked.
    let changes: KeychainRules.Changes?
}

/// Where a keychain call stands after the user's session has read it.
enum KeychainStart: Sendable {
    case answered(KeychainReply)
    case proving(PendingKeychain)
}

extension UserSession {
    /// Reads a keychain call: answers it when nobody needs to be asked (adds, deletes, reads
    /// without data, items without an access control), else names the proofs it needs.
    func keychainStart(
        _ operation: KeychainOperation,
        _ request: KeychainRequest,
        app: AppIdentity
    ) async -> KeychainStart {
        do {
            switch operation {
            case .add: return .answered(try await keychainAdd(request, app: app))
            case .copy: return try await copyStart(request, app: app)
            case .update: return try await updateStart(request, app: app)
            case .delete: return .answered(try keychainDelete(request, app: app))
            }
        } catch {
            return .answered(reply(for: error, operation))
        }
    }

    /// Opens (a copy) or changes (an update) what the proofs accepted. `waited`: a step was
    /// evaluated, so other requests of the user may have run meanwhile: the user's state and the
    /// items are read again first.
    func keychainFinish(_ pending: PendingKeychain, accepted: [StoredItem], waited: Bool) async -> KeychainReply {
        do {
            var accepted = accepted
            if let now = try await stateAfterPrompt(for: accepted.map(\.protected), waited: waited) {
                let planned = pending.proofs.planned
                if pending.operation == .copy && pending.request.matchAll {
                    // All matches: one that can no longer be used is left out, as before the prompt.
                    accepted = AccessPlan.usable(accepted, \.protected, planned: planned, now: now)
                } else {
                    try AccessPlan.stillUsable(accepted.map(\.protected), planned: planned, now: now)
                }
            }
            if waited, let ac = pending.changes?.accessControl, let requirement = pending.changes?.requirement,
                // The new protection is bound to the user's state as it is now (a real sensor's
                // enrolment may have changed while the prompt was open).
                let problem = try await creationProblem(
                    ac.protection,
                    requirement,
                    applicationPasswordGiven: pending.request.applicationPassword != nil
                )
            {
                throw KeychainFailure(problem)
            }
            switch pending.operation {
            case .copy: return try copyFinish(pending.request, accepted: accepted, waited: waited)
            case .update: return try updateFinish(pending.request, pending.changes!, accepted: accepted, waited: waited)
            case .add, .delete: preconditionFailure("\(pending.operation) proves nothing")
            }
        } catch let denial as AccessDenial {
            return reply(for: KeychainFailure(denial), pending.operation)
        } catch {
            return reply(for: error, pending.operation)
        }
    }

    private func reply(for error: any Error, _ operation: KeychainOperation) -> KeychainReply {
        if let f = error as? KeychainFailure { return KeychainReply(status: f.status, message: f.message) }
        logger.error("keychain call failed", metadata: ["uid": "\(uid)", "op": "\(operation)", "error": "\(error)"])
        return KeychainReply(status: .notAvailable, message: "the keychain could not complete the call")
    }

    /// Decrypts the item's secret. An item with an application password counts wrong ones
    /// (`PasswordAttempts`): during a delay nothing is checked, and a failure is stored
    /// before the answer goes.
    private func open(_ item: StoredItem, _ request: KeychainRequest) throws -> Data {
        let guarded = item.sealed.passwordSalt != nil && request.applicationPassword != nil
        var attempts = guarded ? try storage.applicationPasswordAttempts(item: item.id) : PasswordAttempts()
        if let wait = attempts.retryAfter(now: clock.wall()) {
            logger.notice(
                "application password entry for this item is delayed",
                metadata: ["uid": "\(uid)", "after": "\(attempts.failures)"]
            )
            throw KeychainFailure(
                .authFailed,
                "application password entry for this item is delayed after \(attempts.failures) wrong ones; try again in \(Int(wait.rounded(.up))) s"
            )
        }
        let key = try classKey(KeyClass(item.protection))
        do {
            let secret = try ItemSealing.open(
                item.sealed,
                key: key,
                identity: item.identity,
                applicationPassword: request.applicationPassword
            )
            if attempts.failures > 0 { try storage.setPasswordAttempts(PasswordAttempts(), item: item.id) }
            return secret
        } catch let error as CoreError where error.code == .applicationPasswordNeeded {
            throw KeychainFailure(.authFailed, "the item needs its application password (LAContext.setCredential)")
        } catch let error as CoreError where error.code == .wrongApplicationPassword {
            attempts.recordFailure(now: clock.wall())
            try storage.setPasswordAttempts(attempts, item: item.id)
            throw KeychainFailure(
                .authFailed,
                "wrong application password (\(attempts.failures) in a row for this item)"
            )
        } catch {
            throw KeychainFailure(.authFailed, "the item could not be decrypted (damaged)")
        }
    }

}

extension UserSession {
    private func keychainAdd(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainReply {
        let new = try KeychainRules.newItem(request.attributes, accessControl: request.accessControl)
        let group = try accessGroup(request.attributes, app: app)
        if let problem = try await creationProblem(
            new.protection,
            new.requirement,
            applicationPasswordGiven: request.applicationPassword != nil
        ) {
            throw KeychainFailure(problem)
        }
        let now = clock.wall()
        var attributes = new.attributes
        attributes["class"] = .string(new.itemClass)
        attributes["agrp"] = .string(group)
        attributes["pdmn"] = .string(new.protection.rawValue)
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        var item = StoredItem(
            uid: uid,
            accessGroup: group,
            itemClass: new.itemClass,
            attributes: attributes,
            protection: new.protection,
            flags: new.flags,
            enrolmentGeneration: record.enrolmentGeneration,
            sealed: ItemSealing.Sealed(wrappedKey: Data(), ciphertext: Data(), passwordSalt: nil),
            persistentRef: SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) },
            created: now,
            modified: now
        )
        item.heldKey = try request.heldKey.map { try heldKey($0, app: app) }
        item.sealed = try ItemSealing.seal(
            new.secret,
            key: try classKey(KeyClass(item.protection)),
            identity: item.identity,
            applicationPassword: new.requirement.applicationPassword ? request.applicationPassword : nil
        )
        do {
            item.id = try await storage.insertItem(
                item,
                passcodeEpoch: KeyClass(item.protection) == .passcodeSet ? record.passcodeEpoch : nil
            )
        } catch let error as DaemonError where error.code == .keychainQuotaExceeded {
            throw KeychainFailure(.diskFull, error.message)
        } catch let error as DaemonError where error.code == .duplicateItem {
            throw KeychainFailure(.duplicateItem, "an item with the same primary attributes exists")
        } catch let error as DaemonError where error.code == .passcodeRemoved {
            throw KeychainFailure(CreationProblem.passcodeNeeded)
        }
        let wantsResult = request.returnData || request.returnAttributes || request.returnPersistentRef
        return KeychainReply(status: .success, items: wantsResult ? [shaped(item, request, data: new.secret)] : [])
    }

    private func copyStart(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainStart {
        let candidates = try matches(request.attributes, app: app, readingAttributes: request.returnAttributes)
        let wanted = request.matchAll ? (request.limit ?? Int.max) : 1
        guard request.returnData else {
            // Attributes and references only: nothing is opened, nobody is asked.
            return .answered(try answer(candidates.prefix(wanted).map { shaped($0, request, data: nil) }))
        }
        // One item: the first that matches, refused if it cannot be used; all: the usable ones.
        // kSecUseAuthenticationUISkip leaves out items that would prompt.
        let rules = AccessProofs<StoredItem>.Rules(
            wanted: wanted,
            leaveOutInvalidated: request.matchAll,
            leaveOutNotInteractive: request.authenticationUI == .skip
        )
        let pending: PendingKeychain
        do throws(AccessDenial) {
            pending = PendingKeychain(
                operation: .copy,
                request: request,
                proofs: try await proofs(candidates.map { ($0, $0.protected) }, rules: rules),
                changes: nil
            )
        } catch { throw KeychainFailure(error) }
        return try started(pending)
    }

    /// Answers at once when the proofs need no step; else hands them to the connection.
    private func started(_ pending: PendingKeychain) throws -> KeychainStart {
        var proofs = pending.proofs
        switch proofs.next() {
        case .prove: return .proving(pending)
        case .denied(let denial): throw KeychainFailure(denial)
        case .finished(let accepted, _):
            switch pending.operation {
            case .copy: return .answered(try copyFinish(pending.request, accepted: accepted, waited: false))
            default:
                return .answered(try updateFinish(pending.request, pending.changes!, accepted: accepted, waited: false))
            }
        }
    }

    /// Until a step was proven, an item is answered as matched (its version when the query read
    /// it: other requests may have run meanwhile, without anyone being asked anything). One deleted
    /// or changed while a prompt was open is not answered.
    private func copyFinish(_ request: KeychainRequest, accepted: [StoredItem], waited: Bool) throws -> KeychainReply {
        var results: [KeychainItem] = []
        for item in accepted {
            guard try !waited || storage.itemUnchanged(id: item.id, uid: uid, modified: item.modified) else {
                if request.matchAll { continue }
                throw KeychainFailure(
                    .itemNotFound,
                    "the item was deleted or changed while the prompt was open; read it again"
                )
            }
            results.append(shaped(item, request, data: try open(item, request)))
        }
        return try answer(results)
    }

    private func answer(_ results: [KeychainItem]) throws -> KeychainReply {
        guard !results.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        return KeychainReply(status: .success, items: results)
    }

    /// Our choice, as Apple's behave: updates of one item that ask nobody anything all succeed,
    /// the last one's values stay — such an update reads the user's state first and then reads and
    /// writes its items without letting any other request of the user run in between. Once it has
    /// waited for the person, it never overwrites a change made meanwhile (`itemNotFound`, read it
    /// again), and it changes no item unless every matching one was proven.
    private func updateStart(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainStart {
        let changes = try KeychainRules.changes(request.changes ?? [:], accessControl: request.changesAccessControl)
        // The one read of the user's state; nothing after it suspends until the proofs.
        let enrolled = try await identities()
        if let ac = changes.accessControl, let requirement = changes.requirement,
            let problem = CreationProblem.check(
                protection: ac.protection,
                requirement: requirement,
                passcodeSet: passcodeIsSet,
                enrolled: !enrolled.isEmpty,
                applicationPasswordGiven: request.applicationPassword != nil
            )
        {
            throw KeychainFailure(problem)
        }
        let candidates = try matches(request.attributes, app: app)
        guard !candidates.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        let state = recordedAccessState
        let proofs = AccessProofs(
            candidates.map { (candidate: $0, plan: AccessPlan($0.protected, now: state)) },
            rules: .every,
            planned: state
        )
        return try started(PendingKeychain(operation: .update, request: request, proofs: proofs, changes: changes))
    }

    /// Every item is resealed before any is written, and all are written in one transaction: an
    /// update that cannot change one of its items (a wrong application password, a duplicate, a
    /// change made meanwhile) changes none.
    private func updateFinish(
        _ request: KeychainRequest,
        _ changes: KeychainRules.Changes,
        accepted: [StoredItem],
        waited: Bool
    ) throws -> KeychainReply {
        let now = clock.wall()
        let writes = try accepted.map { old in
            var item = old
            for (key, value) in changes.attributes { item.attributes[key] = value }
            try KeychainRules.checkSynchronizable(
                item.attributes,
                protection: changes.accessControl?.protection ?? item.protection
            )
            item.attributes["mdat"] = .date(now)
            if let ac = changes.accessControl {
                item.flags = ac.flags
                item.protection = ac.protection
                item.attributes["pdmn"] = .string(ac.protection.rawValue)
                item.enrolmentGeneration = record.enrolmentGeneration
            }
            // Every update reseals: the seal covers the protection, and opening the old item first
            // means an item with an application password is never rewritten without it.
            let secret = try open(old, request)
            item.sealed = try ItemSealing.seal(
                changes.secret ?? secret,
                key: try classKey(KeyClass(item.protection)),
                identity: item.identity,
                applicationPassword: item.flags.contains(.applicationPassword) ? request.applicationPassword : nil
            )
            item.modified = now
            return (item: item, expectedModified: old.modified)
        }
        do { try storage.updateItems(writes) } catch let error as DaemonError where error.code == .keychainQuotaExceeded
        {
            throw KeychainFailure(.diskFull, error.message)
        } catch let error as DaemonError where error.code == .duplicateItem {
            throw KeychainFailure(.duplicateItem, "the change would duplicate another item's primary attributes")
        } catch let error as DaemonError where error.code == .itemChangedMeanwhile {
            throw KeychainFailure(
                .itemNotFound,
                "an item changed or was deleted while this update waited; read it again"
            )
        }
        return KeychainReply(status: .success)
    }

    /// Deleting needs no authentication: an invalidated item can always be removed.
    private func keychainDelete(_ request: KeychainRequest, app: AppIdentity) throws -> KeychainReply {
        let candidates = try matches(request.attributes, app: app, readingAttributes: false)
        guard !candidates.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        try storage.deleteItems(ids: candidates.map(\.id), uid: uid)
        return KeychainReply(status: .success)
    }
}
