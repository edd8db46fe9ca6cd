import EnclaveClient
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// A connection's contexts stay bounded in the daemon's memory.
final class ContextLimitTests: XCTestCase {
    func testLiveContextsAreCappedAndInvalidatedOnesKeepAnsweringInvalidContext() throws {
        let enclave = try TestEnclave()
        let c = try EnclaveConnection(socketPath: enclave.socketPath)
        defer { c.close() }
        for i in 0..<1024 {
            guard case .canEvaluate(let r) = try c.request(.canEvaluate(.init(context: "ctx-\(i)", policy: 2))) else {
                return XCTFail("context \(i)")
            }
            XCTAssertNil(r.error)
        }
        guard case .failure(let f) = try c.request(.canEvaluate(.init(context: "one-too-many", policy: 2))) else {
            return XCTFail("no limit")
        }
        XCTAssertEqual(f.code, .invalidParameter)
        XCTAssertEqual(try c.request(.invalidate(.init(context: "ctx-7"))), .ok)
        guard case .canEvaluate(let fresh) = try c.request(.canEvaluate(.init(context: "one-too-many", policy: 2)))
        else { return XCTFail("slot not freed") }
        XCTAssertNil(fresh.error)
        guard case .canEvaluate(let gone) = try c.request(.canEvaluate(.init(context: "ctx-7", policy: 2))) else {
            return XCTFail()
        }
        XCTAssertEqual(gone.error, .invalidContext, "an invalidated id stays invalid")
        guard
            case .evaluated(let e) = try c.request(
                .evaluate(.init(context: "ctx-7", policy: 2, options: .init(reason: "x")))
            )
        else { return XCTFail() }
        XCTAssertEqual(e.error, .invalidContext)
    }
}
