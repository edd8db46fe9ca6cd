import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// The user's state an access plan depends on, read once per request where it can change the plan.
extension UserSession {
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
}
