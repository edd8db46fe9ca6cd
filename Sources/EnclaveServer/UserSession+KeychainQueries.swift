import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// Which items a keychain call may see: its access groups and the matching items (nothing is opened here).
extension UserSession {
    /// Items belong to (user, access group). An app's own group is its identity (executable path);
    /// other groups are the ones the person configured with the app as a member.
    /// An interpreter has no group of its own (`AppIdentity`): only the groups it was put in.
    func accessGroup(_ a: [String: KeychainValue], app: AppIdentity) throws -> String {
        guard let value = a["agrp"] else {
            guard let own = app.ownGroup else {
                throw KeychainFailure(
                    .missingEntitlement,
                    "\(app) runs other programs' code, so it has no keychain items of its own: "
                        + "name an access group the person put it in (lactl keychain share GROUP \(app.name))"
                )
            }
            return own
        }
        guard case .string(let group) = value,
            try group == app.ownGroup || storage.accessGroups(uid: uid, containing: app.name).contains(group)
        else {
            throw KeychainFailure(
                .missingEntitlement,
                "access group \(KeychainRules.describe(value)) is not configured for \(app)"
            )
        }
        return group
    }

    /// The groups the app may search: its own first, then those the person put it in (a query
    /// naming one is narrowed to it by the storage).
    static func searchableGroups(_ app: AppIdentity, configured: [String]) -> [String] {
        (app.ownGroup.map { [$0] } ?? []) + configured
    }

    /// Candidates matching every attribute of the query, in creation order. Their attributes are
    /// read only if `readingAttributes` (or the query needs them to match).
    func matches(
        _ query: [String: KeychainValue],
        app: AppIdentity,
        readingAttributes: Bool = true
    ) throws -> [StoredItem] {
        let indexed = try KeychainRules.IndexedQuery(query)
        let uid = uid
        return try storage.items(matching: indexed, uid: uid, readingAttributes: readingAttributes) { db in
            Self.searchableGroups(app, configured: try Storage.accessGroups(db, uid: uid, containing: app.name))
        }
    }

    func shaped(_ item: StoredItem, _ request: KeychainRequest, data: Data?) -> KeychainItem {
        KeychainItem(
            attributes: request.returnAttributes ? item.attributes : [:],
            data: request.returnData ? data : nil,
            persistentRef: request.returnPersistentRef ? item.persistentRef : nil
        )
    }
}
