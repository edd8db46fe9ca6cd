import EnclaveCore
import EnclaveProtocol
import XCTest

/// `AdminPolicy`: who may reach beyond their own app or user.
final class AdminPolicyTests: XCTestCase {
    /// A user-mode daemon here serves uid 1000.
    func testWhoMayAdministerWhom() {
        let table: [(UInt32?, UInt32, DaemonMode, UInt32?)] = [
            (nil, 1000, .user, 1000),
            (1000, 1000, .user, 1000),
            (1001, 1000, .user, nil),
            (1001, 0, .user, nil),
            (nil, 0, .user, 1000),
            (1000, 0, .user, 1000),
            (1001, 0, .system, 1001),
            (0, 1000, .system, nil),
            (nil, 1000, .system, 1000),
        ]
        for (requested, caller, mode, allowed) in table {
            var got: UInt32?
            do { got = try AdminPolicy.target(requested, caller: caller, mode: mode, servedUser: 1000) } catch {
                XCTAssertEqual(error.code, .notPermitted)
            }
            XCTAssertEqual(got, allowed, "\(String(describing: requested)) by \(caller) in \(mode)")
        }
    }

    /// No app lifts the lockout on its own, in user mode either (the user's apps are what
    /// guesses): root does, and in user mode the person with the login password.
    func testWhoLiftsTheLockout() {
        let table: [(UInt32, DaemonMode, AdminPolicy.PasscodeLockoutReset?)] = [
            (0, .system, .administrator), (0, .user, .administrator),
            (1000, .user, .loginPassword), (1000, .system, nil),
        ]
        for (caller, mode, expected) in table {
            var got: AdminPolicy.PasscodeLockoutReset?
            do { got = try AdminPolicy.passcodeLockoutReset(caller: caller, mode: mode) } catch {
                XCTAssertEqual(error.code, .notPermitted)
            }
            XCTAssertEqual(got, expected, "\(caller) in \(mode)")
        }
        XCTAssertNotNil(
            AdminPolicy.purpose(of: .resetPasscodeLockout(.init(uid: nil))),
            "the prompt says what is being allowed"
        )
    }

    func testRootVisitingAUsersDaemonMayOnlyLiftTheCounter() {
        let allowed = Request.Operation.allCases.filter(AdminPolicy.administratorMay)
        XCTAssertEqual(allowed, [.hello, .resetPasscodeLockout])
    }

    func testAuditScopes() {
        XCTAssertEqual(AdminPolicy.auditScope(caller: 0, mode: .system, everyApp: false), .everyUser)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 0, mode: .system, everyApp: true), .everyAppOfCaller)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 0, mode: .user, everyApp: false), .callingApp)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 1000, mode: .system, everyApp: false), .callingApp)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 1000, mode: .user, everyApp: true), .everyAppOfCaller)
    }
}

extension AdminPolicyTests {
    /// Every request that reaches beyond the calling app says, in the person's words, what it
    /// allows; a request that asks nothing of the person has no purpose.
    func testEveryAdministrationSaysWhatItAllows() {
        let asking: [(Request, String)] = [
            (.setPasscode, "set the device passcode"),
            (.changePasscode, "change the device passcode"),
            (.removePasscode, "every enrolled identity"),
            (.enroll(.init(name: "left thumb")), "\"left thumb\""),
            (.unenroll(.init(name: "left thumb")), "\"left thumb\""),
            (.audit(.init(limit: 5, everyApp: true)), "every app"),
            (.keychainList, "never secrets"),
            (.keychainRemove(.init(persistentRef: Data([1]))), "whichever of your apps"),
            (
                .configureAccessGroup(.init(name: "team", apps: ["/usr/bin/a", "/usr/bin/b"])),
                "\"team\": /usr/bin/a, /usr/bin/b"
            ),
            (.configureAccessGroup(.init(name: "team", apps: [])), "remove the keychain access group \"team\""),
            (.accessGroups, "access groups"),
        ]
        for (request, words) in asking {
            let purpose = AdminPolicy.purpose(of: request)
            XCTAssertTrue(purpose?.contains(words) == true, "\(request): \(String(describing: purpose))")
        }
        for request: Request in [
            .status, .audit(.init(limit: 5, everyApp: false)), .hello(.init(version: 1)), .clearSimulated,
            .handoff(.init(kind: .terminal)),
        ] {
            XCTAssertNil(AdminPolicy.purpose(of: request), "\(request)")
        }
    }

    func testAPipeGivesThePasscodeOnlyToRootOrWhereAllowed() {
        for (caller, allowed, expected) in [
            (UInt32(0), false, true), (0, true, true), (1000, false, false), (1000, true, true),
        ] {
            XCTAssertEqual(
                AdminPolicy.pipeGivesThePasscode(caller: caller, allowed: allowed),
                expected,
                "uid \(caller), allowed \(allowed)"
            )
        }
    }
}
