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

    func reply(for error: any Error, _ operation: KeychainOperation) -> KeychainReply {
        if let f = error as? KeychainFailure { return KeychainReply(status: f.status, message: f.message) }
        logger.error("keychain call failed", metadata: ["uid": "\(uid)", "op": "\(operation)", "error": "\(error)"])
        return KeychainReply(status: .notAvailable, message: "the keychain could not complete the call")
    }

    /// The user's state an access plan depends on, read afresh (a real sensor's enrolment may
    /// have changed behind our back).
    func accessState() async throws -> AccessPlan.UserState {
        _ = try await identities()
        return recordedAccessState
    }

    /// `accessState()`, its failure as a denial.
    func readAccessState() async throws(AccessDenial) -> AccessPlan.UserState {
        do { return try await accessState() } catch { throw .unavailable("\(error)") }
    }

    /// The user's state as last read.
    var recordedAccessState: AccessPlan.UserState {
        AccessPlan.UserState(
            enrolmentGeneration: record.enrolmentGeneration,
            passcodeEpoch: record.passcodeEpoch,
            passcodeSet: passcodeIsSet
        )
    }

    /// The proofs `candidates` need, planned on one reading of the user's state (none when no
    /// plan depends on it).
    func proofs<Candidate>(
        _ candidates: [(Candidate, AccessPlan.Protected)],
        rules: AccessProofs<Candidate>.Rules
    ) async throws(AccessDenial) -> AccessProofs<Candidate> {
        let state =
            candidates.contains(where: { $0.1.dependsOnState }) ? try await readAccessState() : recordedAccessState
        return AccessProofs(
            candidates.map { (candidate: $0.0, plan: AccessPlan($0.1, now: state)) },
            rules: rules,
            planned: state
        )
    }

    /// The user's state read again after the proofs, when they waited (other requests — an
    /// enrolment change, the passcode's removal — may have run meanwhile) and a plan depends on it;
    /// nil when nothing needs reading.
    func stateAfterPrompt(
        for protected: [AccessPlan.Protected],
        waited: Bool
    ) async throws(AccessDenial) -> AccessPlan.UserState? {
        guard waited, protected.contains(where: \.dependsOnState) else { return nil }
        return try await readAccessState()
    }

    /// The first creation rule a new protection breaks, given the user's state now.
    func creationProblem(
        _ protection: Protection,
        _ requirement: AccessRequirement,
        applicationPasswordGiven: Bool
    ) async throws -> CreationProblem? {
        let enrolled = try await identities()
        return CreationProblem.check(
            protection: protection,
            requirement: requirement,
            passcodeSet: passcodeIsSet,
            enrolled: !enrolled.isEmpty,
            applicationPasswordGiven: applicationPasswordGiven
        )
    }

    // MARK: Checks

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

    /// The groups the app may search: its own and those the person put it in. (A query naming
    /// one is narrowed to it by the storage.)
    func searchableGroups(_ app: AppIdentity) throws -> [String] {
        (app.ownGroup.map { [$0] } ?? []) + (try storage.accessGroups(uid: uid, containing: app.name))
    }

    /// Candidates matching every attribute of the query, in creation order. Their attributes are
    /// read only if `readingAttributes` (or the query needs them to match).
    func matches(
        _ query: [String: KeychainValue],
        app: AppIdentity,
        readingAttributes: Bool = true
    ) throws -> [StoredItem] {
        let indexed = try KeychainRules.IndexedQuery(query)
        return try storage.items(
            matching: indexed,
            uid: uid,
            accessGroups: try searchableGroups(app),
            readingAttributes: readingAttributes
        )
    }

    /// Decrypts the item's secret. An item with an application password counts wrong ones
    /// (`PasswordAttempts`): during a delay nothing is checked, and a failure is stored
    /// before the answer goes.
    func open(_ item: StoredItem, _ request: KeychainRequest) throws -> Data {
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
        } catch ItemSealing.Problem.applicationPasswordNeeded {
            throw KeychainFailure(.authFailed, "the item needs its application password (LAContext.setCredential)")
        } catch ItemSealing.Problem.wrongApplicationPassword {
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

    func shaped(_ item: StoredItem, _ request: KeychainRequest, data: Data?) -> KeychainItem {
        KeychainItem(
            attributes: request.returnAttributes ? item.attributes : [:],
            data: request.returnData ? data : nil,
            persistentRef: request.returnPersistentRef ? item.persistentRef : nil
        )
    }

}
