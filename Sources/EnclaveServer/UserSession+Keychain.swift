import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// A keychain call that ends with an `OSStatus` other than success.
struct KeychainFailure: Error {
    var status: Int32
    var message: String
    init(_ status: Int32, _ message: String) { self.status = status; self.message = message }
}

/// Proves presence for one step of an item's access control, on the request's context (the
/// connection handler runs the evaluation and keeps the context's authorization).
typealias KeychainAuthorizer = @Sendable (_ step: EvaluationStep, _ reason: String, _ noUI: Bool) async -> EvaluationMachine.Outcome

extension UserSession {
    static let itemClasses: Set<String> = ["genp", "inet", "keys"]
    /// Attributes stored and matched; anything else in a request is refused with errSecParam.
    static let itemAttributes: Set<String> = [
        "class", "svce", "acct", "srvr", "labl", "agrp", "pdmn", "gena", "icmt", "desc", "sync", "ptcl", "port", "path", "sdmn",
        "atyp", "crtr", "type", "invi", "nega", "atag", "klbl", "kcls", "bsiz", "perm", "tkid", "cdat", "mdat",
    ]
    static let valueKeys: Set<String> = ["v_Data", "v_PersistentRef"]

    func keychain(_ operation: KeychainOperation, _ request: KeychainRequest, app: String, authorize: KeychainAuthorizer) async -> KeychainReply {
        do {
            switch operation {
            case .add: return try await keychainAdd(request, app: app)
            case .copy: return try await keychainCopy(request, app: app, authorize: authorize)
            case .update: return try await keychainUpdate(request, app: app, authorize: authorize)
            case .delete: return try keychainDelete(request, app: app)
            }
        } catch let f as KeychainFailure {
            return KeychainReply(status: f.status, message: f.message)
        } catch {
            logger.error("keychain call failed", metadata: ["uid": "\(uid)", "op": "\(operation)", "error": "\(error)"])
            return KeychainReply(status: KeychainStatus.notAvailable, message: "the keychain could not complete the call")
        }
    }

    // MARK: Checks

    private func itemClass(_ a: [String: KeychainValue]) throws -> String {
        guard case .string(let c)? = a["class"] else { throw KeychainFailure(KeychainStatus.param, "kSecClass is missing or not a string") }
        if c == "cert" || c == "idnt" { throw KeychainFailure(KeychainStatus.unimplemented, "certificates and identities are not supported yet") }
        guard Self.itemClasses.contains(c) else { throw KeychainFailure(KeychainStatus.param, "unknown kSecClass \"\(c)\"") }
        return c
    }

    private func checkKeys(_ a: [String: KeychainValue]) throws {
        for key in a.keys where !Self.itemAttributes.contains(key) && !Self.valueKeys.contains(key) {
            throw KeychainFailure(KeychainStatus.param, "unsupported attribute \"\(key.prefix(32))\"")
        }
    }

    /// Items belong to (user, access group). An app's own group is its identity (executable path);
    /// other groups are the ones the person configured with the app as a member.
    private func accessGroup(_ a: [String: KeychainValue], app: String) throws -> String {
        guard let value = a["agrp"] else { return app }
        guard case .string(let group) = value, try group == app || storage.accessGroups(uid: uid, containing: app).contains(group) else {
            throw KeychainFailure(KeychainStatus.missingEntitlement, "access group \(Self.text(value)) is not configured for \(app)")
        }
        return group
    }

    /// The groups a query searches: the named one if the app may use it, else all of the app's.
    private func searchGroups(_ query: [String: KeychainValue], app: String) throws -> [String] {
        let mine = [app] + (try storage.accessGroups(uid: uid, containing: app))
        guard let value = query["agrp"] else { return mine }
        guard case .string(let group) = value, mine.contains(group) else { return [] }
        return [group]
    }

    static func text(_ v: KeychainValue) -> String {
        if case .string(let s) = v { return "\"\(s.prefix(64))\"" }
        return "(not a string)"
    }

    /// True when a `biometryCurrentSet` item can never be used again (no passcode alternative).
    private func invalidated(_ item: StoredItem) -> Bool {
        guard let requirement = try? AccessRequirement(flags: item.flags) else { return true }
        return requirement.steps(madeAt: item.enrolmentGeneration, enrolmentNow: record.enrolmentGeneration) == nil
    }

    private static let invalidatedMessage = "the item was protected with biometryCurrentSet and the enrolled identities have changed since; it can only be deleted"

    /// Candidates matching every attribute of the query, in creation order.
    private func matches(_ query: [String: KeychainValue], app: String) throws -> [StoredItem] {
        try checkKeys(query)
        let itemClass = try itemClass(query)
        let groups = try searchGroups(query, app: app)
        if groups.isEmpty { return [] }
        func s(_ k: String) -> String? { if case .string(let v)? = query[k] { return v }; return nil }
        var persistentRef: Data?
        if let ref = query["v_PersistentRef"] {
            guard case .data(let d) = ref else { throw KeychainFailure(KeychainStatus.param, "kSecValuePersistentRef must be data") }
            persistentRef = d
        }
        let candidates = try storage.items(uid: uid, accessGroups: groups, itemClass: itemClass, service: s("svce"), account: s("acct"),
                                           server: s("srvr"), persistentRef: persistentRef)
        return candidates.filter { item in
            query.allSatisfy { key, value in Self.valueKeys.contains(key) || key == "class" || item.attributes[key] == value }
        }
    }

    /// Runs every step of the item's access control; throws the status a failed step maps to.
    /// The enrolment is read fresh before and checked again after the prompt: the actor serves
    /// other requests (an enrolment change) while a prompt is open.
    private func authorize(_ item: StoredItem, _ request: KeychainRequest, authorize: KeychainAuthorizer) async throws {
        let requirement = try AccessRequirement(flags: item.flags)
        _ = try await identities()
        guard let steps = requirement.steps(madeAt: item.enrolmentGeneration, enrolmentNow: record.enrolmentGeneration) else {
            throw KeychainFailure(KeychainStatus.invalidItemRef, Self.invalidatedMessage)
        }
        let noUI = request.interactionNotAllowed || request.authenticationUI == "u_AuthUIF" || request.authenticationUI == "u_AuthUIS"
        for step in steps {
            let outcome = await authorize(step, request.reason ?? "Access a keychain item", noUI)
            if case .failure(let code, let message) = outcome { throw KeychainFailure(Self.status(for: code), message) }
        }
        _ = try await identities()
        if requirement.steps(madeAt: item.enrolmentGeneration, enrolmentNow: record.enrolmentGeneration) == nil {
            throw KeychainFailure(KeychainStatus.invalidItemRef, Self.invalidatedMessage)
        }
    }

    static func status(for code: LAErrorCode) -> Int32 {
        switch code {
        case .userCancel, .appCancel, .systemCancel, .userFallback: return KeychainStatus.userCanceled
        case .notInteractive: return KeychainStatus.interactionNotAllowed
        default: return KeychainStatus.authFailed
        }
    }

    private func open(_ item: StoredItem, _ request: KeychainRequest) throws -> Data {
        do {
            return try ItemSealing.open(item.sealed, userKey: userKey, identity: item.identity, applicationPassword: request.applicationPassword)
        } catch ItemSealing.Problem.applicationPasswordNeeded {
            throw KeychainFailure(KeychainStatus.authFailed, "the item needs its application password (LAContext.setCredential)")
        } catch {
            throw KeychainFailure(KeychainStatus.authFailed, "the item could not be decrypted (wrong application password, or damaged)")
        }
    }

    private func shaped(_ item: StoredItem, _ request: KeychainRequest, data: Data?) -> KeychainItem {
        KeychainItem(attributes: request.returnAttributes ? item.attributes : [:], data: request.returnData ? data : nil,
                     persistentRef: request.returnPersistentRef ? item.persistentRef : nil)
    }

    // MARK: Operations

    private func keychainAdd(_ request: KeychainRequest, app: String) async throws -> KeychainReply {
        let a = request.attributes
        try checkKeys(a)
        let itemClass = try itemClass(a)
        let group = try accessGroup(a, app: app)
        let protectionName: String
        if let ac = request.accessControl { protectionName = ac.protection } else if case .string(let p)? = a["pdmn"] { protectionName = p } else { protectionName = Protection.whenUnlocked.rawValue }
        guard let protection = Protection(rawValue: protectionName) else { throw KeychainFailure(KeychainStatus.param, "unknown kSecAttrAccessible value \"\(protectionName.prefix(16))\"") }
        let flags = request.accessControl?.flags ?? 0
        let requirement: AccessRequirement
        do { requirement = try AccessRequirement(flags: flags) } catch { throw KeychainFailure(KeychainStatus.param, "\(error)") }
        if protection == .whenPasscodeSetThisDeviceOnly && !passcodeIsSet {
            throw KeychainFailure(KeychainStatus.authFailed, "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly needs a device passcode")
        }
        let enrolled = try await identities()
        if requirement.currentSet && enrolled.isEmpty {
            throw KeychainFailure(KeychainStatus.authFailed, "biometryCurrentSet needs at least one enrolled identity")
        }
        if requirement.applicationPassword && request.applicationPassword == nil {
            throw KeychainFailure(KeychainStatus.authFailed, "applicationPassword needs LAContext.setCredential(_:type: .applicationPassword)")
        }
        if case .bool(true)? = a["sync"], ["aku", "cku", "dku", "akpu"].contains(protection.rawValue) {
            throw KeychainFailure(KeychainStatus.param, "a synchronizable item cannot be …ThisDeviceOnly")
        }
        for (key, value) in a where key != "v_Data" {
            if case .string(let text) = value, text.utf8.count > 4096 { throw KeychainFailure(KeychainStatus.param, "attribute \(key) is longer than 4 KiB") }
            if case .data(let bytes) = value, bytes.count > 4096 { throw KeychainFailure(KeychainStatus.param, "attribute \(key) is larger than 4 KiB") }
        }
        var secret = Data()
        if let value = a["v_Data"] {
            guard case .data(let d) = value else { throw KeychainFailure(KeychainStatus.param, "kSecValueData must be data") }
            secret = d
        }
        let now = clock.wall()
        var attributes = a.filter { !Self.valueKeys.contains($0.key) }
        attributes["class"] = .string(itemClass)
        attributes["agrp"] = .string(group)
        attributes["pdmn"] = .string(protection.rawValue)
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        var item = StoredItem(uid: uid, accessGroup: group, itemClass: itemClass, attributes: attributes, protection: protection,
                              flags: flags, enrolmentGeneration: record.enrolmentGeneration,
                              sealed: ItemSealing.Sealed(wrappedKey: Data(), ciphertext: Data(), passwordSalt: nil),
                              persistentRef: SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }, created: now, modified: now)
        item.sealed = try ItemSealing.seal(secret, userKey: userKey, identity: item.identity,
                                           applicationPassword: requirement.applicationPassword ? request.applicationPassword : nil)
        do { item.id = try storage.insertItem(item) } catch KeychainStoreError.duplicate {
            throw KeychainFailure(KeychainStatus.duplicateItem, "an item with the same primary attributes exists")
        }
        let wantsResult = request.returnData || request.returnAttributes || request.returnPersistentRef
        return KeychainReply(status: KeychainStatus.success, items: wantsResult ? [shaped(item, request, data: secret)] : [])
    }

    private func keychainCopy(_ request: KeychainRequest, app: String, authorize: KeychainAuthorizer) async throws -> KeychainReply {
        let candidates = try matches(request.attributes, app: app)
        var results: [KeychainItem] = []
        for item in candidates {
            var data: Data?
            if request.returnData {
                if invalidated(item) {
                    if request.matchAll { continue }
                    throw KeychainFailure(KeychainStatus.invalidItemRef, Self.invalidatedMessage)
                }
                do {
                    try await self.authorize(item, request, authorize: authorize)
                } catch let f as KeychainFailure where request.authenticationUI == "u_AuthUIS" && f.status == KeychainStatus.interactionNotAllowed {
                    continue // kSecUseAuthenticationUISkip: items that would prompt are left out
                }
                data = try open(item, request)
            }
            results.append(shaped(item, request, data: data))
            if !request.matchAll || results.count >= (request.limit ?? Int.max) { break }
        }
        guard !results.isEmpty else { throw KeychainFailure(KeychainStatus.itemNotFound, "no item matches the query") }
        return KeychainReply(status: KeychainStatus.success, items: results)
    }

    private func keychainUpdate(_ request: KeychainRequest, app: String, authorize: KeychainAuthorizer) async throws -> KeychainReply {
        let changes = request.changes ?? [:]
        try checkKeys(changes)
        if changes["class"] != nil { throw KeychainFailure(KeychainStatus.param, "kSecClass cannot be changed") }
        for key in ["pdmn", "cdat", "mdat"] where changes[key] != nil {
            throw KeychainFailure(KeychainStatus.param, "\(key) is kept by the keychain; change the protection with kSecAttrAccessControl or kSecAttrAccessible")
        }
        if changes["agrp"] != nil { throw KeychainFailure(KeychainStatus.param, "an item cannot move to another access group") }
        if changes["v_PersistentRef"] != nil { throw KeychainFailure(KeychainStatus.param, "kSecValuePersistentRef cannot be changed") }
        var newSecret: Data?
        if let value = changes["v_Data"] {
            guard case .data(let d) = value else { throw KeychainFailure(KeychainStatus.param, "kSecValueData must be data") }
            newSecret = d
        }
        var newRequirement: AccessRequirement?
        var newProtection: Protection?
        if let ac = request.changesAccessControl {
            guard let p = Protection(rawValue: ac.protection) else { throw KeychainFailure(KeychainStatus.param, "unknown kSecAttrAccessible value") }
            do { newRequirement = try AccessRequirement(flags: ac.flags) } catch { throw KeychainFailure(KeychainStatus.param, "\(error)") }
            if p == .whenPasscodeSetThisDeviceOnly && !passcodeIsSet {
                throw KeychainFailure(KeychainStatus.authFailed, "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly needs a device passcode")
            }
            let enrolled = try await identities()
            if newRequirement!.currentSet && enrolled.isEmpty {
                throw KeychainFailure(KeychainStatus.authFailed, "biometryCurrentSet needs at least one enrolled identity")
            }
            if newRequirement!.applicationPassword && request.applicationPassword == nil {
                throw KeychainFailure(KeychainStatus.authFailed, "applicationPassword needs LAContext.setCredential(_:type: .applicationPassword)")
            }
            newProtection = p
        }
        let candidates = try matches(request.attributes, app: app)
        guard !candidates.isEmpty else { throw KeychainFailure(KeychainStatus.itemNotFound, "no item matches the query") }
        for old in candidates {
            if invalidated(old) { throw KeychainFailure(KeychainStatus.invalidItemRef, Self.invalidatedMessage) }
            try await self.authorize(old, request, authorize: authorize)
            var item = old
            for (key, value) in changes where !Self.valueKeys.contains(key) { item.attributes[key] = value }
            if case .bool(true)? = item.attributes["sync"], ["aku", "cku", "dku", "akpu"].contains((newProtection ?? item.protection).rawValue) {
                throw KeychainFailure(KeychainStatus.param, "a synchronizable item cannot be …ThisDeviceOnly")
            }
            let now = clock.wall()
            item.attributes["mdat"] = .date(now)
            if let p = newProtection {
                item.flags = request.changesAccessControl!.flags
                item.protection = p
                item.attributes["pdmn"] = .string(p.rawValue)
                item.enrolmentGeneration = record.enrolmentGeneration
            }
            // Every update reseals: the seal covers the protection, and opening the old item first
            // means an item with an application password is never rewritten without it.
            let secret = try open(old, request)
            let needsPassword = (try? AccessRequirement(flags: item.flags))?.applicationPassword ?? false
            item.sealed = try ItemSealing.seal(newSecret ?? secret, userKey: userKey, identity: item.identity,
                                               applicationPassword: needsPassword ? request.applicationPassword : nil)
            item.modified = now
            do { try storage.updateItem(item, expectedModified: old.modified) } catch KeychainStoreError.duplicate {
                throw KeychainFailure(KeychainStatus.duplicateItem, "the change would duplicate another item's primary attributes")
            } catch KeychainStoreError.changedMeanwhile {
                throw KeychainFailure(KeychainStatus.itemNotFound, "the item changed or was deleted while this update waited; read it again")
            }
        }
        return KeychainReply(status: KeychainStatus.success)
    }

    /// Deleting needs no authentication: an invalidated item can always be removed.
    private func keychainDelete(_ request: KeychainRequest, app: String) throws -> KeychainReply {
        let candidates = try matches(request.attributes, app: app)
        guard !candidates.isEmpty else { throw KeychainFailure(KeychainStatus.itemNotFound, "no item matches the query") }
        try storage.deleteItems(ids: candidates.map(\.id), uid: uid)
        return KeychainReply(status: KeychainStatus.success)
    }
}

extension UserSession {
    /// Why an item cannot be used now, in words for `lactl keychain`.
    private func unusableReason(_ item: StoredItem) -> String? {
        invalidated(item) ? "invalidated: protected with biometryCurrentSet, and the enrolled identities changed since; it can only be deleted" : nil
    }

    func keychainList(passcode: String) async throws -> [KeychainListing] {
        try await confirmPasscode(passcode)
        return try storage.allItems(uid: uid).map { item in
            func s(_ k: String) -> String? { if case .string(let v)? = item.attributes[k] { return v }; return nil }
            return KeychainListing(app: item.accessGroup, itemClass: item.itemClass, service: s("svce"), account: s("acct"), server: s("srvr"),
                                   label: s("labl"), protection: item.protection.rawValue, flags: item.flags, created: item.created,
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
        guard !name.isEmpty, name.utf8.count <= 128, !name.hasPrefix("/") else {
            // App identities are absolute paths: a group named like one would hand over that app's items.
            throw Failure(.invalidParameter, "a group name has 1 to 128 bytes and does not start with \"/\"")
        }
        guard apps.count <= 32, apps.allSatisfy({ $0.hasPrefix("/") && $0.utf8.count <= 1024 }) else {
            throw Failure(.invalidParameter, "members are up to 32 absolute executable paths")
        }
        try await confirmPasscode(passcode)
        try storage.setAccessGroup(uid: uid, name: name, apps: apps)
    }

    func accessGroups(passcode: String) async throws -> [String: [String]] {
        try await confirmPasscode(passcode)
        return try storage.accessGroups(uid: uid)
    }
}
