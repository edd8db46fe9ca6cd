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

    /// Attack: someone listening on the bus between the CPU and a discrete TPM (a logic analyser
    /// on its SPI or LPC lines, as done against BitLocker) reads what the commands carry. Here
    /// tpm2-tss's pcap TCTI records every byte exchanged with the simulator: before the sealing
    /// and unsealing ran in an encrypting session, the secret was in the capture twice (the Create
    /// command and the Unseal response); now neither carries it in clear.
    func testTheSecretNeverCrossesTheBusInClear() throws {
        let capture = NSTemporaryDirectory() + "tpm-\(UUID().uuidString).pcap"
        defer { unlink(capture) }
        setenv("TCTI_PCAP_FILE", capture, 1)
        defer { unsetenv("TCTI_PCAP_FILE") }
        let secret = (0..<32).map { UInt8(0xA0 ^ $0) }
        let tapped = "pcap:" + tpm.tcti
        let blob = try TPMDevice.seal(secret, tcti: tapped)
        XCTAssertEqual(try TPMDevice.unseal(blob, tcti: tapped), secret)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: capture)))
        XCTAssertGreaterThan(bytes.count, 1000, "the capture holds the exchange")
        XCTAssertNotNil(bytes.firstRange(of: Array(blob.prefix(16))), "the capture is of these commands")
        XCTAssertNil(bytes.firstRange(of: secret), "the secret crossed the bus in clear")
    }

    /// The rollback counter: defined, moved durably (a TPM restart keeps it), read and moved only
    /// with its auth value, never on the bus in clear; deleted, it is missing, and one defined
    /// again starts no lower than the old one ended.
    func testTheCounterMovesOnlyForwardAndOnlyWithItsAuthorization() throws {
        let capture = NSTemporaryDirectory() + "tpm-\(UUID().uuidString).pcap"
        defer { unlink(capture) }
        setenv("TCTI_PCAP_FILE", capture, 1)
        defer { unsetenv("TCTI_PCAP_FILE") }
        let tapped = "pcap:" + tpm.tcti
        let auth = (0..<32).map { UInt8(0x5A ^ $0) }
        let counter = try TPMDevice.defineCounter(auth: auth, tcti: tapped)
        XCTAssertTrue(TPMDevice.counterIndices.contains(counter.index))
        XCTAssertEqual(try TPMDevice.readCounter(index: counter.index, auth: auth, tcti: tapped), counter.value)
        XCTAssertEqual(
            try TPMDevice.incrementCounter(index: counter.index, auth: auth, tcti: tapped),
            counter.value + 1
        )
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: capture)))
        XCTAssertGreaterThan(bytes.count, 500, "the capture holds the exchange")
        XCTAssertNil(bytes.firstRange(of: auth), "the counter's auth value crossed the bus in clear")

        tpm.stop()
        try tpm.start()
        XCTAssertEqual(try TPMDevice.readCounter(index: counter.index, auth: auth, tcti: tpm.tcti), counter.value + 1)

        var wrong = auth
        wrong[0] ^= 1
        XCTAssertThrowsError(try TPMDevice.incrementCounter(index: counter.index, auth: wrong, tcti: tpm.tcti))
        XCTAssertThrowsError(try TPMDevice.readCounter(index: counter.index, auth: wrong, tcti: tpm.tcti))
        XCTAssertEqual(try TPMDevice.readCounter(index: counter.index, auth: auth, tcti: tpm.tcti), counter.value + 1)

        try TPMDevice.undefineCounter(index: counter.index, tcti: tpm.tcti)
        XCTAssertThrowsError(try TPMDevice.readCounter(index: counter.index, auth: auth, tcti: tpm.tcti)) { error in
            XCTAssertTrue((error as? DaemonError)?.tpmObjectMissing == true, "\(error)")
        }
        let again = try TPMDevice.defineCounter(auth: auth, tcti: tpm.tcti)
        XCTAssertGreaterThanOrEqual(again.value, counter.value + 1, "a counter defined again never starts lower")
    }
}
