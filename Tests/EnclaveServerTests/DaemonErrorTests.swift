import EnclaveProtocol
import XCTest

@testable import EnclaveServer

final class DaemonErrorTests: XCTestCase {
    /// A refusal reaches the client under the wire's code of the same name, with its words; a
    /// change not made durable says which; the daemon's own trouble reaches it as nothing (the
    /// connection answers that it could not complete the request, and logs the rest).
    func testEachCodeReachesTheWireOnce() {
        let told: [DaemonError.Code: FailureCode] = [
            .busy: .busy, .notPermitted: .notPermitted, .invalidParameter: .invalidParameter,
            .notFound: .notFound, .alreadyExists: .alreadyExists, .passcodeIncorrect: .passcodeIncorrect,
            .passcodeRetryLater: .passcodeRetryLater, .passcodeNotSet: .passcodeNotSet,
            .passcodeAlreadySet: .passcodeAlreadySet, .passcodeDisabled: .passcodeDisabled, .noSensor: .noSensor,
            .stateNotSaved: .internalError, .rollbackCounterNotMoved: .internalError,
        ]
        for code in DaemonError.Code.allCases {
            let error = DaemonError(code, "words for \(code)")
            if let wire = told[code] {
                XCTAssertEqual(error.failure, Failure(wire, "words for \(code)"), "\(code)")
            } else {
                XCTAssertNil(error.failure, "\(code) is the daemon's own: its words stay in the log")
            }
            XCTAssertEqual(error.description, "words for \(code)")
        }
    }

    /// A key request's refusal is answered as the key's problem; the rest says only that the key
    /// operation could not complete.
    func testEachKeyCodeReachesTheKeysAnswer() {
        let told: [DaemonError.Code: KeyReply.Problem] = [
            .keyInvalid: .invalidKey, .keyInvalidated: .invalidated, .keyNotAvailable: .notAvailable,
            .keyQuotaExceeded: .notAvailable, .invalidParameter: .invalidParameter,
        ]
        for code in DaemonError.Code.allCases {
            XCTAssertEqual(DaemonError(code, "").keyProblem, told[code], "\(code)")
        }
    }

    func testARetryLaterSaysWhen() {
        let error = DaemonError(.passcodeRetryLater, "wait", retryAfter: 30)
        XCTAssertEqual(error.failure?.retryAfter, 30)
    }

    /// The wire's own refusals (`Request.validate`, `AdminPolicy`) pass as they are; anything
    /// else is not told.
    func testAnyErrorIsToldOnlyWhenItIsARefusal() {
        let wire = Failure(.invalidParameter, "too long")
        XCTAssertEqual(DaemonError.failure(for: wire), wire)
        XCTAssertEqual(DaemonError.failure(for: DaemonError(.busy, "later")), Failure(.busy, "later"))
        XCTAssertNil(DaemonError.failure(for: DaemonError(.privateFile, "/var/lib/x could not be written")))
        XCTAssertNil(DaemonError.failure(for: CocoaError(.fileNoSuchFile)))
    }
}
