import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

extension UserSession {
    /// Why an item cannot be used now, in words for `lactl keychain`.
    private func unusableReason(_ item: StoredItem) -> String? {
        if case .invalidated(let why) = AccessPlan(item.protected, now: recordedAccessState) {
            return "invalidated: " + why.message("item")
        }
        return nil
    }

    func keychainList(passcode: String) async throws -> [KeychainListing] {
        try await confirmPasscode(passcode)
        return try storage.allItems(uid: uid).map { item in
            let s = { KeychainRules.string(item.attributes, $0) }
            return KeychainListing(
                app: item.accessGroup,
                itemClass: item.itemClass,
                service: s("svce"),
                account: s("acct"),
                server: s("srvr"),
                label: s("labl"),
                protection: item.protection,
                flags: item.flags,
                created: item.created,
                modified: item.modified,
                persistentRef: item.persistentRef,
                unusable: unusableReason(item)
            )
        }
    }

    func keychainRemove(passcode: String, persistentRef: Data) async throws {
        try await confirmPasscode(passcode)
        let found = try storage.allItems(uid: uid, persistentRef: persistentRef)
        guard !found.isEmpty else { throw DaemonError(.notFound, "no item has that reference") }
        try storage.deleteItems(ids: found.map(\.id), uid: uid)
    }
}

extension UserSession {
    func configureAccessGroup(passcode: String, name: String, apps: [String]) async throws {
        guard !name.isEmpty, name.utf8.count <= 128, !AppIdentity.isIdentityName(name) else {
            // A group named like an app identity would hand over that app's items.
            throw DaemonError(
                .invalidParameter,
                "a group name has 1 to 128 bytes and does not start with \(AppIdentity.identityPrefixes.map { "\"\($0)\"" }.joined(separator: ", "))"
            )
        }
        guard apps.count <= 32, apps.allSatisfy({ AppIdentity.isMemberName($0) && $0.utf8.count <= 1024 }) else {
            throw DaemonError(
                .invalidParameter,
                "members are up to 32 absolute executable paths or sandboxed apps (flatpak:APP_ID, snap:NAME)"
            )
        }
        try await confirmPasscode(passcode)
        try storage.setAccessGroup(uid: uid, name: name, apps: apps)
    }

    func accessGroups(passcode: String) async throws -> [String: [String]] {
        try await confirmPasscode(passcode)
        return try storage.accessGroups(uid: uid)
    }
}
