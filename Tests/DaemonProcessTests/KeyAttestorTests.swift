import EnclaveProtocol
import Foundation
import GRDB
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

/// The daemon's attestation authority as a process keeps it: made once per state, the same after
/// a restart, and, when it cannot be opened, missed by nothing but attestation.
final class KeyAttestorTests: XCTestCase {
    private func root(_ enclave: TestEnclave) throws -> KeyReply {
        guard
            case .key(let reply) = try enclave.send(
                .key(KeyRequest(operation: .attestationRoot, kind: .signing, context: UUID().uuidString))
            )
        else {
            throw XCTSkip("unexpected reply")
        }
        return reply
    }

    func testADamagedAuthorityLeavesOnlyAttestationOut() throws {
        let enclave = try TestEnclave()
        let first = try root(enclave)
        XCTAssertNil(first.problem)
        XCTAssertTrue(
            first.message?.contains("user daemon of uid \(getuid()), SHA-256 of its key ") == true,
            first.message ?? ""
        )
        try enclave.restart()
        XCTAssertEqual(try root(enclave).certificates, first.certificates, "made once per state directory")

        enclave.stop()
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite")
        try queue.write { db in try db.execute(sql: "UPDATE meta SET value = x'00' WHERE name = 'attestationAuthority'")
        }
        try queue.close()
        try enclave.start()
        let damaged = try root(enclave)
        XCTAssertEqual(damaged.problem, .notAvailable)
        XCTAssertTrue(damaged.message?.contains("attestation authority is not usable") == true, damaged.message ?? "")
        XCTAssertTrue(enclave.log().contains("keys will not be attested"), enclave.log())
        // Everything else answers as before.
        try enclave.queue(.match)
        XCTAssertEqual(try enclave.status().queuedEvents, 1)
        XCTAssertNoThrow(try enclave.enrolments())
    }
}
