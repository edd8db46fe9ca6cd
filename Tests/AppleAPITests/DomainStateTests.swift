import EnclaveClient
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// behavior.md §4: the domain state is per app, follows enrolment history, and enrolment needs
/// the passcode. The second app is a copy of lactl at another path (app identity = executable path).
final class DomainStateTests: XCTestCase {
    private func lactlStatus(_ lactl: String, _ enclave: TestEnclave) throws -> [String: Any] {
        let out = try runProcess(lactl, ["status", "--json", "--socket", enclave.socketPath])
        XCTAssertEqual(out.status, 0, out.stderr)
        return try JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as! [String: Any]
    }

    private func copyOfLactl(named name: String, in enclave: TestEnclave) throws -> String {
        let path = enclave.directory + "/" + name
        try FileManager.default.copyItem(atPath: productPath("lactl"), toPath: path)
        return path
    }

    func testTwoAppsSeeDifferentDomainStates() throws {
        let enclave = try TestEnclave()
        let appA = try copyOfLactl(named: "app-a", in: enclave)
        let appB = try copyOfLactl(named: "app-b", in: enclave)
        let a = try lactlStatus(appA, enclave)["domainState"] as? String
        let b = try lactlStatus(appB, enclave)["domainState"] as? String
        let aAgain = try lactlStatus(appA, enclave)["domainState"] as? String
        let mine = enclave.run { LAContext().domainState.biometry.stateHash?.base64EncodedString() }
        XCTAssertNotNil(a)
        XCTAssertNotNil(b)
        XCTAssertNotEqual(a, b, "different apps get different values")
        XCTAssertNotEqual(a, mine)
        XCTAssertEqual(a, aAgain, "stable while enrolment is unchanged")
        XCTAssertEqual(
            try lactlStatus(appA, enclave)["app"] as? String,
            appA,
            "the app identity is the executable's path, from the kernel"
        )
    }

    func testEveryEnrolmentChangeChangesTheDomainStateIncludingAddThenRemove() throws {
        let enclave = try TestEnclave()
        let state = { enclave.run { LAContext().domainState.biometry.stateHash } }
        let initial = state()
        XCTAssertNotNil(initial)
        try enclave.enroll("left-thumb")
        let added = state()
        try enclave.unenroll("left-thumb")
        let removed = state()
        XCTAssertNotEqual(initial, added)
        XCTAssertNotEqual(added, removed)
        XCTAssertNotEqual(initial, removed, "add-then-remove leaves a different value: the hash reflects history")
        try enclave.unenroll("right-index-finger")
        XCTAssertNil(state(), "nil when nothing is enrolled")
    }

    func testEnrolmentNeedsTheRightPasscodeAndAWrongOneCounts() throws {
        let enclave = try TestEnclave()
        XCTAssertThrowsError(try enclave.enroll("intruder", passcode: "0000")) { error in
            guard case .failure(let f)? = error as? EnclaveClientError else { return XCTFail("\(error)") }
            XCTAssertEqual(f.code, .passcodeIncorrect)
        }
        let s = try enclave.status()
        XCTAssertEqual(s.enrolledCount, 1)
        XCTAssertEqual(s.passcodeFailures, 1, "a wrong passcode at enrolment is a guess like any other")
        XCTAssertEqual(try enclave.enrolments(), ["right-index-finger"], "the intruder was not enrolled")
    }

    func testRemovingThePasscodeRemovesEnrolment() throws {
        let enclave = try TestEnclave()
        try enclave.removePasscode(current: "1234")
        let s = try enclave.status()
        XCTAssertFalse(s.passcodeSet)
        XCTAssertEqual(s.enrolledCount, 0)
        XCTAssertNil(s.domainState)
        enclave.run { XCTAssertEqual(canEvaluate(LAContext(), .deviceOwnerAuthentication), .passcodeNotSet) }
    }
}
