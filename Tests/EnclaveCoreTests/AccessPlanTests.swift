import EnclaveCore
import EnclaveProtocol
import XCTest

/// `AccessPlan`: what an item's or key's access control needs, given the user's state now.
final class AccessPlanTests: XCTestCase {
    private func state(enrolment: UInt64 = 5, epoch: UInt64 = 2, passcode: Bool = true) -> AccessPlan.UserState {
        AccessPlan.UserState(enrolmentGeneration: enrolment, passcodeEpoch: epoch, passcodeSet: passcode)
    }

    private func item(
        _ flags: AccessControlFlags,
        _ protection: Protection = .whenUnlocked,
        madeAt: UInt64? = 5,
        epoch: UInt64? = nil
    ) -> AccessPlan.Protected {
        AccessPlan.Protected(flags: flags, protection: protection, enrolmentGeneration: madeAt, passcodeEpoch: epoch)
    }

    func testPlans() {
        let table: [(AccessPlan.Protected, AccessPlan.UserState, AccessPlan, String)] = [
            (item([]), state(), .open, "no access control"),
            (item([.privateKeyUsage]), state(), .open, "a key without constraints"),
            (item(.userPresence), state(), .prove([.owner]), ""),
            (item([.biometryAny, .devicePasscode]), state(), .prove([.biometric, .passcode]), "all, in order"),
            (item(.biometryCurrentSet), state(), .prove([.biometric]), "same enrolment"),
            (item(.biometryCurrentSet), state(enrolment: 6), .invalidated(.enrolmentChanged), "enrolment changed"),
            (
                item([.biometryCurrentSet, .or, .devicePasscode]), state(enrolment: 6), .prove([.passcode]),
                "the passcode alternative"
            ),
            (item(.biometryAny), state(enrolment: 6), .prove([.biometric]), "biometryAny survives"),
            (
                item(.biometryCurrentSet, madeAt: nil), state(enrolment: 9), .prove([.biometric]),
                "not bound to an enrolment"
            ),
            (
                item([], .whenPasscodeSetThisDeviceOnly), state(passcode: false), .invalidated(.passcodeRemoved),
                "no passcode now"
            ),
            (
                item(.userPresence, .whenPasscodeSetThisDeviceOnly, epoch: 2), state(), .prove([.owner]),
                "same passcode epoch"
            ),
            (
                item(.userPresence, .whenPasscodeSetThisDeviceOnly, epoch: 1), state(), .invalidated(.passcodeRemoved),
                "the passcode was removed since, even though one is set again"
            ),
            (
                item(.userPresence, .whenPasscodeSetThisDeviceOnly, epoch: nil), state(epoch: 7), .prove([.owner]),
                "no epoch recorded (items)"
            ),
            (
                item(.biometryCurrentSet, .whenPasscodeSetThisDeviceOnly, epoch: 1), state(enrolment: 6),
                .invalidated(.passcodeRemoved),
                "the passcode reason comes first"
            ),
            (
                item(.userPresence, .whenUnlocked, epoch: 1), state(passcode: false), .prove([.owner]),
                "epochs matter only for akpu"
            ),
            (
                item(AccessControlFlags(rawValue: 1 << 2)), state(), .invalidated(.unreadable),
                "flags this daemon never writes"
            ),
            (item([.and, .or, .devicePasscode]), state(), .invalidated(.unreadable), ""),
        ]
        for (protected, now, plan, why) in table {
            XCTAssertEqual(AccessPlan(protected, now: now), plan, "\(protected) \(now) \(why)")
        }
    }

    func testWhatDependsOnTheUsersState() {
        XCTAssertTrue(item(.biometryCurrentSet).dependsOnState, "bound to an enrolment generation")
        XCTAssertTrue(item(.userPresence, .whenPasscodeSetThisDeviceOnly, madeAt: nil).dependsOnState)
        XCTAssertFalse(item(.biometryAny).dependsOnState, "no enrolment change or passcode removal can invalidate it")
        XCTAssertFalse(item([]).dependsOnState)
        XCTAssertFalse(
            AccessPlan.Protected(flags: .biometryCurrentSet, protection: nil, enrolmentGeneration: nil).dependsOnState,
            "evaluateAccessControl: nothing was made, nothing can be invalidated"
        )
        // The rule is sound: a plan said not to depend on the state is the same in every state.
        let states = [
            state(), state(enrolment: 9), state(epoch: 7), state(passcode: false),
            state(enrolment: 0, epoch: 0, passcode: false),
        ]
        let flags: [AccessControlFlags] = [
            [], .userPresence, .biometryAny, .biometryCurrentSet, [.biometryCurrentSet, .or, .devicePasscode],
            [.biometryAny, .devicePasscode], .devicePasscode, .privateKeyUsage, AccessControlFlags(rawValue: 1 << 2),
        ]
        for f in flags {
            for protection in Protection.allCases {
                for madeAt: UInt64? in [nil, 5] {
                    for epoch: UInt64? in [nil, 2] {
                        let p = item(f, protection, madeAt: madeAt, epoch: epoch)
                        guard !p.dependsOnState else { continue }
                        XCTAssertEqual(Set(states.map { "\(AccessPlan(p, now: $0))" }).count, 1, "\(p)")
                    }
                }
            }
        }
    }
}
