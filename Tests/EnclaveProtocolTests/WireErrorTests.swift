import EnclaveProtocol
import XCTest

/// What the wire's reading refuses, and the answer the daemon sends for each: said once, for
/// every code.
final class WireErrorTests: XCTestCase {
    func testEveryCodeHasItsAnswer() {
        let expected: [WireError.Code: FailureCode] = [
            .oversizedFrame: .malformedMessage, .emptyFrame: .malformedMessage, .truncatedFrame: .malformedMessage,
            .malformed: .malformedMessage, .unknownOperation: .unknownOperation, .invalidArguments: .invalidParameter,
        ]
        XCTAssertEqual(Set(expected.keys), Set(WireError.Code.allCases), "every code is decided")
        for code in WireError.Code.allCases {
            let error = WireError(code, "why \(code)", id: 7)
            XCTAssertEqual(error.failure, Failure(expected[code]!, "why \(code)"), "\(code)")
            XCTAssertEqual(error.description, "\(code.rawValue): why \(code)")
        }
    }

    /// A request's error keeps the id its header named, so the answer reaches the request.
    func testARequestsErrorKeepsItsID() {
        XCTAssertThrowsError(
            try RequestEnvelope.decode(Array(#"{"id":9,"op":"canEvaluate","args":{"policy":"x"}}"#.utf8))
        ) {
            XCTAssertEqual(($0 as? WireError)?.id, 9)
            XCTAssertEqual(($0 as? WireError)?.failure.code, .invalidParameter)
        }
        XCTAssertThrowsError(try RequestEnvelope.decode(Array("[]".utf8))) {
            XCTAssertNil(($0 as? WireError)?.id)
            XCTAssertEqual(($0 as? WireError)?.failure.code, .malformedMessage)
        }
    }
}
