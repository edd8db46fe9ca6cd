import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

extension UserSession {
    func keychain(_ operation: KeychainOperation, _ request: KeychainRequest, app: AppIdentity, authorize: @escaping StepAuthorizer) async -> KeychainReply {
        let prover = AccessProver(state: { try await self.accessState() }, authorize: authorize)
        do {
            switch operation {
            case .add: return try await keychainAdd(request, app: app)
            case .copy: return try await keychainCopy(request, app: app, prover: prover)
            case .update: return try await keychainUpdate(request, app: app, prover: prover)
            case .delete: return try keychainDelete(request, app: app)
            }
        } catch let f as KeychainFailure {
            return KeychainReply(status: f.status, message: f.message)
        } catch {
            logger.error("keychain call failed", metadata: ["uid": "\(uid)", "op": "\(operation)", "error": "\(error)"])
            return KeychainReply(status: .notAvailable, message: "the keychain could not complete the call")
        }
    }

    /// The user's state an access plan depends on, read afresh.
    func accessState() async throws -> AccessPlan.UserState {
        _ = try await identities()
        return AccessPlan.UserState(enrolmentGeneration: record.enrolmentGeneration, passcodeEpoch: record.passcodeEpoch, passcodeSet: passcodeIsSet)
    }

    /// The first creation rule a new protection breaks, given the user's state now.
    func creationProblem(_ protection: Protection, _ requirement: AccessRequirement, applicationPasswordGiven: Bool) async throws -> CreationProblem? {
        let enrolled = try await identities()
        return CreationProblem.check(protection: protection, requirement: requirement, passcodeSet: passcodeIsSet, enrolled: !enrolled.isEmpty,
                                     applicationPasswordGiven: applicationPasswordGiven)
    }

    // MARK: Checks

    /// Items belong to (user, access group). An app's own group is its identity (executable path);
    /// other groups are the ones the person configured with the app as a member.
    /// An interpreter has no group of its own (`AppIdentity`): only the groups it was put in.
    private func accessGroup(_ a: [String: KeychainValue], app: AppIdentity) throws -> String {
        guard let value = a["agrp"] else {
            guard let own = app.ownGroup else {
                throw KeychainFailure(.missingEntitlement, "\(app) runs other programs' code, so it has no keychain items of its own: "
                                      + "name an access group the person put it in (lactl keychain share GROUP \(app.name))")
            }
            return own
        }
        guard case .string(let group) = value, try group == app.ownGroup || storage.accessGroups(uid: uid, containing: app.name).contains(group) else {
            throw KeychainFailure(.missingEntitlement, "access group \(KeychainRules.describe(value)) is not configured for \(app)")
        }
        return group
    }

    /// The groups the app may search: its own and those the person put it in. (A query naming
    /// one is narrowed to it by the storage.)
    private func searchableGroups(_ app: AppIdentity) throws -> [String] {
        (app.ownGroup.map { [$0] } ?? []) + (try storage.accessGroups(uid: uid, containing: app.name))
    }

    /// The item's access plan with the user's state as last read.
    private func plan(_ item: StoredItem) -> AccessPlan {
        AccessPlan(item.protected, now: AccessPlan.UserState(enrolmentGeneration: record.enrolmentGeneration, passcodeEpoch: record.passcodeEpoch,
                                                             passcodeSet: passcodeIsSet))
    }

    /// Candidates matching every attribute of the query, in creation order. Their attributes are
    /// read only if `readingAttributes` (or the query needs them to match).
    private func matches(_ query: [String: KeychainValue], app: AppIdentity, readingAttributes: Bool = true) throws -> [StoredItem] {
        let indexed = try KeychainRules.IndexedQuery(query)
        return try storage.items(matching: indexed, uid: uid, accessGroups: try searchableGroups(app), readingAttributes: readingAttributes)
    }

    /// Proves the item's access control on the request's context.
    /// Answers whether a step was proven (the request waited on it).
    @discardableResult
    private func authorize(_ item: StoredItem, _ request: KeychainRequest, prover: AccessProver) async throws -> Bool {
        let noUI = request.interactionNotAllowed || (request.authenticationUI?.forbidsPrompt ?? false)
        do throws(AccessDenial) { return try await prover.prove(item.protected, reason: request.reason ?? "Access a keychain item", noUI: noUI) } catch {
            throw KeychainFailure(error)
        }
    }

    /// Decrypts the item's secret. An item with an application password counts wrong ones
    /// (`PasswordAttempts`): during a delay nothing is checked, and a failure is stored
    /// before the answer goes.
    private func open(_ item: StoredItem, _ request: KeychainRequest) throws -> Data {
        let guarded = item.sealed.passwordSalt != nil && request.applicationPassword != nil
        var attempts = guarded ? try storage.applicationPasswordAttempts(item: item.id) : PasswordAttempts()
        if let wait = attempts.retryAfter(now: clock.wall()) {
            logger.notice("application password entry for this item is delayed", metadata: ["uid": "\(uid)", "after": "\(attempts.failures)"])
            throw KeychainFailure(.authFailed, "application password entry for this item is delayed after \(attempts.failures) wrong ones; try again in \(Int(wait.rounded(.up))) s")
        }
        let key = try classKey(KeyClass(item.protection))
        do {
            let secret = try ItemSealing.open(item.sealed, key: key, identity: item.identity, applicationPassword: request.applicationPassword)
            if attempts.failures > 0 { try storage.setPasswordAttempts(PasswordAttempts(), item: item.id) }
            return secret
        } catch ItemSealing.Problem.applicationPasswordNeeded {
            throw KeychainFailure(.authFailed, "the item needs its application password (LAContext.setCredential)")
        } catch ItemSealing.Problem.wrongApplicationPassword {
            attempts.recordFailure(now: clock.wall())
            try storage.setPasswordAttempts(attempts, item: item.id)
            throw KeychainFailure(.authFailed, "wrong application password (\(attempts.failures) in a row for this item)")
        } catch {
            throw KeychainFailure(.authFailed, "the item could not be decrypted (damaged)")
        }
    }

    private func shaped(_ item: StoredItem, _ request: KeychainRequest, data: Data?) -> KeychainItem {
        KeychainItem(attributes: request.returnAttributes ? item.attributes : [:], data: request.returnData ? data : nil,
                     persistentRef: request.returnPersistentRef ? item.persistentRef : nil)
    }

    // MARK: Operations

    private func keychainAdd(_ request: KeychainRequest, app: AppIdentity) async throws -> KeychainReply {
        let new = try KeychainRules.newItem(request.attributes, accessControl: request.accessControl)
        let group = try accessGroup(request.attributes, app: app)
        if let problem = try await creationProblem(new.protection, new.requirement, applicationPasswordGiven: request.applicationPassword != nil) {
            throw KeychainFailure(problem)
        }
        let now = clock.wall()
        var attributes = new.attributes
        attributes["class"] = .string(new.itemClass)
        attributes["agrp"] = .string(group)
        attributes["pdmn"] = .string(new.protection.rawValue)
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        var item = StoredItem(uid: uid, accessGroup: group, itemClass: new.itemClass, attributes: attributes, protection: new.protection,
                              flags: new.flags, enrolmentGeneration: record.enrolmentGeneration,
                              sealed: ItemSealing.Sealed(wrappedKey: Data(), ciphertext: Data(), passwordSalt: nil),
                              persistentRef: SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }, created: now, modified: now)
        item.heldKey = try request.heldKey.map { try heldKey($0, app: app) }
        item.sealed = try ItemSealing.seal(new.secret, key: try classKey(KeyClass(item.protection)), identity: item.identity,
                                           applicationPassword: new.requirement.applicationPassword ? request.applicationPassword : nil)
        do { item.id = try await storage.insertItem(item, passcodeEpoch: KeyClass(item.protection) == .passcodeSet ? record.passcodeEpoch : nil) } catch KeychainStoreError.quotaExceeded(let why) {
            throw KeychainFailure(.diskFull, why)
        } catch KeychainStoreError.duplicate {
            throw KeychainFailure(.duplicateItem, "an item with the same primary attributes exists")
        } catch KeychainStoreError.passcodeRemoved {
            throw KeychainFailure(CreationProblem.passcodeNeeded)
        }
        let wantsResult = request.returnData || request.returnAttributes || request.returnPersistentRef
        return KeychainReply(status: .success, items: wantsResult ? [shaped(item, request, data: new.secret)] : [])
    }

    private func keychainCopy(_ request: KeychainRequest, app: AppIdentity, prover: AccessProver) async throws -> KeychainReply {
        let candidates = try matches(request.attributes, app: app, readingAttributes: request.returnAttributes)
        var results: [KeychainItem] = []
        /// Whether this request has waited on a prompt yet (other requests of the user ran meanwhile).
        var waited = false
        for item in candidates {
            var data: Data?
            if request.returnData {
                if case .invalidated(let why) = plan(item) {
                    if request.matchAll { continue }
                    throw KeychainFailure(.invalidated(why))
                }
                do {
                    if try await authorize(item, request, prover: prover) { waited = true }
                } catch let f as KeychainFailure where request.authenticationUI == .skip && f.status == .interactionNotAllowed {
                    continue // kSecUseAuthenticationUISkip: items that would prompt are left out
                }
                // Deleted or changed while a prompt was open: what was read before is not answered.
                // Until this request has shown a prompt, an item is answered as matched (its version
                // when the query read it — other requests may have run in the awaits since, without
                // anyone being asked anything).
                guard try !waited || storage.itemUnchanged(id: item.id, uid: uid, modified: item.modified) else {
                    if request.matchAll { continue }
                    throw KeychainFailure(.itemNotFound, "the item was deleted or changed while the prompt was open; read it again")
                }
                data = try open(item, request)
            }
            results.append(shaped(item, request, data: data))
            if !request.matchAll || results.count >= (request.limit ?? Int.max) { break }
        }
        guard !results.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        return KeychainReply(status: .success, items: results)
    }

    /// Our choice, as Apple's behave: updates of one item that ask nobody anything all succeed,
    /// the last one's values stay. One that read the items while another's write was in flight
    /// (the actor runs others while it awaits the access proof) starts over on the items as they
    /// are now, at most 63 times; once it has waited for the person, for any of its items, it never
    /// overwrites a change made meanwhile (`itemNotFound`, read it again) and never starts over (a
    /// restart would ask again).
    private func keychainUpdate(_ request: KeychainRequest, app: AppIdentity, prover: AccessProver) async throws -> KeychainReply {
        for _ in 1..<Self.updateRestarts {
            do { return try await keychainUpdateOnce(request, app: app, prover: prover) } catch UpdateRace.writtenMeanwhile {
                continue
            }
        }
        do { return try await keychainUpdateOnce(request, app: app, prover: prover) } catch UpdateRace.writtenMeanwhile {
            throw KeychainFailure(.itemNotFound, "the item kept changing while this update ran; read it again")
        }
    }

    /// How many times an update that asked nobody is tried (at most 63 restarts after concurrent writes).
    static let updateRestarts = 64

    private enum UpdateRace: Error { case writtenMeanwhile }

    private func keychainUpdateOnce(_ request: KeychainRequest, app: AppIdentity, prover: AccessProver) async throws -> KeychainReply {
        let changes = try KeychainRules.changes(request.changes ?? [:], accessControl: request.changesAccessControl)
        if let ac = changes.accessControl, let requirement = changes.requirement,
           let problem = try await creationProblem(ac.protection, requirement, applicationPasswordGiven: request.applicationPassword != nil) {
            throw KeychainFailure(problem)
        }
        let candidates = try matches(request.attributes, app: app)
        guard !candidates.isEmpty else { throw KeychainFailure(.itemNotFound, "no item matches the query") }
        var waited = false
        for old in candidates {
            if case .invalidated(let why) = plan(old) { throw KeychainFailure(.invalidated(why)) }
            if try await authorize(old, request, prover: prover) { waited = true }
            var item = old
            for (key, value) in changes.attributes { item.attributes[key] = value }
            try KeychainRules.checkSynchronizable(item.attributes, protection: changes.accessControl?.protection ?? item.protection)
            let now = clock.wall()
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
            item.sealed = try ItemSealing.seal(changes.secret ?? secret, key: try classKey(KeyClass(item.protection)), identity: item.identity,
                                               applicationPassword: item.flags.contains(.applicationPassword) ? request.applicationPassword : nil)
            item.modified = now
            do { try storage.updateItem(item, expectedModified: old.modified) } catch KeychainStoreError.quotaExceeded(let why) {
                throw KeychainFailure(.diskFull, why)
            } catch KeychainStoreError.duplicate {
                throw KeychainFailure(.duplicateItem, "the change would duplicate another item's primary attributes")
            } catch KeychainStoreError.changedMeanwhile {
                guard waited else { throw UpdateRace.writtenMeanwhile }
                throw KeychainFailure(.itemNotFound, "the item changed or was deleted while this update waited; read it again")
            }
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

extension UserSession {
    /// Why an item cannot be used now, in words for `lactl keychain`.
    private func unusableReason(_ item: StoredItem) -> String? {
        if case .invalidated(let why) = plan(item) { return "invalidated: " + why.message("item") }
        return nil
    }

    func keychainList(passcode: String) async throws -> [KeychainListing] {
        try await confirmPasscode(passcode)
        return try storage.allItems(uid: uid).map { item in
            let s = { KeychainRules.string(item.attributes, $0) }
            return KeychainListing(app: item.accessGroup, itemClass: item.itemClass, service: s("svce"), account: s("acct"), server: s("srvr"),
                                   label: s("labl"), protection: item.protection, flags: item.flags, created: item.created,
                                   modified: item.modified, persistentRef: item.persistentRef, unusable: unusableReason(item))
        }
    }

    func keychainRemove(passcode: String, persistentRef: Data) async throws {
        try await confirmPasscode(passcode)
        let found = try storage.items(uid: uid, accessGroups: nil, itemClass: nil, service: nil, account: nil, server: nil, persistentRef: persistentRef)
        guard !found.isEmpty else { throw Failure(.notFound, "no item has that reference") }
        try storage.deleteItems(ids: found.map(\.id), uid: uid)
    }
}

extension UserSession {
    func configureAccessGroup(passcode: String, name: String, apps: [String]) async throws {
        guard !name.isEmpty, name.utf8.count <= 128, !AppIdentity.isIdentityName(name) else {
            // A group named like an app identity would hand over that app's items.
            throw Failure(.invalidParameter, "a group name has 1 to 128 bytes and does not start with \(AppIdentity.identityPrefixes.map { "\"\($0)\"" }.joined(separator: ", "))")
        }
        guard apps.count <= 32, apps.allSatisfy({ AppIdentity.isMemberName($0) && $0.utf8.count <= 1024 }) else {
            throw Failure(.invalidParameter, "members are up to 32 absolute executable paths or sandboxed apps (flatpak:APP_ID, snap:NAME)")
        }
        try await confirmPasscode(passcode)
        try storage.setAccessGroup(uid: uid, name: name, apps: apps)
    }

    func accessGroups(passcode: String) async throws -> [String: [String]] {
        try await confirmPasscode(passcode)
        return try storage.accessGroups(uid: uid)
    }
}
