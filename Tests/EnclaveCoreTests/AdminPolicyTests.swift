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
            do { got = try AdminPolicy.target(requested, caller: caller, mode: mode, servedUser: 1000) } catch { XCTAssertEqual(error.code, .notPermitted) }
            XCTAssertEqual(got, allowed, "\(String(describing: requested)) by \(caller) in \(mode)")
        }
    }

    /// In user mode too: the user's apps are what guesses.
    func testOnlyRootLiftsTheLockoutInEitherMode() {
        for mode in [DaemonMode.system, .user] {
            XCTAssertThrowsError(try AdminPolicy.checkPasscodeLockoutReset(caller: 1000, mode: mode), "\(mode)")
            XCTAssertNoThrow(try AdminPolicy.checkPasscodeLockoutReset(caller: 0, mode: mode), "\(mode)")
        }
    }

    func testRootVisitingAUsersDaemonMayOnlyLiftTheCounter() {
        let allowed = Request.Operation.allCases.filter(AdminPolicy.administratorMay)
        XCTAssertEqual(allowed, [.hello, .resetPasscodeLockout])
    }

    func testAuditScopes() {
        XCTAssertEqual(AdminPolicy.auditScope(caller: 0, mode: .system, passcodeGiven: false), .everyUser)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 0, mode: .system, passcodeGiven: true), .everyAppOfCaller)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 0, mode: .user, passcodeGiven: false), .callingApp)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 1000, mode: .system, passcodeGiven: false), .callingApp)
        XCTAssertEqual(AdminPolicy.auditScope(caller: 1000, mode: .user, passcodeGiven: true), .everyAppOfCaller)
    }
}
