import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

extension UserSession {
    // MARK: Operations

    func keychainAdd(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainReply {
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
        } catch KeychainStoreError.quotaExceeded(let why) {
            throw KeychainFailure(.diskFull, why)
        } catch KeychainStoreError.duplicate {
            throw KeychainFailure(.duplicateItem, "an item with the same primary attributes exists")
        } catch KeychainStoreError.passcodeRemoved {
            throw KeychainFailure(CreationProblem.passcodeNeeded)
        }
        let wantsResult = request.returnData || request.returnAttributes || request.returnPersistentRef
        return KeychainReply(status: .success, items: wantsResult ? [shaped(item, request, data: new.secret)] : [])
    }

    func copyStart(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainStart {
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
    func started(_ pending: PendingKeychain) throws -> KeychainStart {
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
    func copyFinish(_ request: KeychainRequest, accepted: [StoredItem], waited: Bool) throws -> KeychainReply {
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

    func answer(_ results: [KeychainItem]) throws -> KeychainReply {
        guard !results.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        return KeychainReply(status: .success, items: results)
    }

    /// Our choice, as Apple's behave: updates of one item that ask nobody anything all succeed,
    /// the last one's values stay — such an update reads the user's state first and then reads and
    /// writes its items without letting any other request of the user run in between. Once it has
    /// waited for the person, it never overwrites a change made meanwhile (`itemNotFound`, read it
    /// again), and it changes no item unless every matching one was proven.
    func updateStart(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainStart {
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
    func updateFinish(
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
        do { try storage.updateItems(writes) } catch KeychainStoreError.quotaExceeded(let why) {
            throw KeychainFailure(.diskFull, why)
        } catch KeychainStoreError.duplicate {
            throw KeychainFailure(.duplicateItem, "the change would duplicate another item's primary attributes")
        } catch KeychainStoreError.changedMeanwhile {
            throw KeychainFailure(
                .itemNotFound,
                "an item changed or was deleted while this update waited; read it again"
            )
        }
        return KeychainReply(status: .success)
    }

    /// Deleting needs no authentication: an invalidated item can always be removed.
    func keychainDelete(_ request: KeychainRequest, app: AppIdentity) throws -> KeychainReply {
        let candidates = try matches(request.attributes, app: app, readingAttributes: false)
        guard !candidates.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        try storage.deleteItems(ids: candidates.map(\.id), uid: uid)
        return KeychainReply(status: .success)
    }
}
