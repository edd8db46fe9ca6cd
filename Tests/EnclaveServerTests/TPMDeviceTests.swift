import Foundation
import IntegrationSupport
import XCTest

@testable import EnclaveServer

/// The TPM commands of the hardware root against a real TPM 2.0 implementation (swtpm): a sealed
/// secret comes back on its TPM, and on no other; a damaged blob is an error, not a crash.
final class TPMDeviceTests: XCTestCase {
    private var tpm: SwtpmSimulator!

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        tpm = try SwtpmSimulator()
    }

    override func tearDown() {
        tpm?.destroy()
        tpm = nil
    }

    func testASealedSecretOpensOnItsTPMAndNoOther() throws {
        let secret = (0..<32).map { UInt8($0 * 7 & 0xff) }
        let blob = try TPMDevice.seal(secret, tcti: tpm.tcti)
        XCTAssertFalse(blob.isEmpty)
        XCTAssertNil(blob.firstRange(of: secret), "the blob never holds the secret in clear")
        XCTAssertEqual(try TPMDevice.unseal(blob, tcti: tpm.tcti), secret)
        // The same TPM after a restart (its state kept, as a machine's through a reboot).
        tpm.stop()
        try tpm.start()
        XCTAssertEqual(try TPMDevice.unseal(blob, tcti: tpm.tcti), secret)

        let other = try SwtpmSimulator()
        defer { other.destroy() }
        XCTAssertThrowsError(try TPMDevice.unseal(blob, tcti: other.tcti), "another TPM opens nothing")
    }

    func testADamagedBlobOrAnAbsentTPMIsAnError() throws {
        let blob = try TPMDevice.seal(Array(repeating: 1, count: 32), tcti: tpm.tcti)
        var damaged = blob
        damaged[damaged.count - 5] ^= 0x40
        XCTAssertThrowsError(try TPMDevice.unseal(damaged, tcti: tpm.tcti))
        XCTAssertThrowsError(try TPMDevice.unseal(Array(blob.dropLast()), tcti: tpm.tcti))
        XCTAssertThrowsError(try TPMDevice.unseal([], tcti: tpm.tcti))
        tpm.stop()
        XCTAssertThrowsError(try TPMDevice.seal([1, 2, 3], tcti: tpm.tcti)) { error in
            XCTAssertTrue("\(error)".contains("opening swtpm"), "\(error)")
        }
    }
}
