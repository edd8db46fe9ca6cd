import Crypto
import XCTest

@testable import TPMWire

/// The TPM's structures read and written without a TPM: a public area and a certify statement
/// as the TPM marshals them (built here field by field), every short or long input refused, and
/// the key derivations' lengths and separation. That the wrapping matches a TPM's own is
/// `TPMDeviceAttestationTests`' (swtpm).
final class TPMWireTests: XCTestCase {
    private func publicArea(
        nameAlg: UInt16 = 0x000B,
        curve: UInt16 = 0x0003,
        coordinate: Int = 32,
        symmetric: Bool = false,
        scheme: UInt16 = 0x0018
    ) -> [UInt8] {
        var w = TPMWriter()
        w.uint16(0x0023)
        w.uint16(nameAlg)
        w.uint32(0x0005_0072)  // fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|restricted|sign
        w.sized([UInt8]())
        if symmetric {
            w.uint16(0x0006)
            w.uint16(128)
            w.uint16(0x0043)
        } else {
            w.uint16(0x0010)
        }
        w.uint16(scheme)  // ECDSA by default
        w.uint16(0x000B)  // SHA-256
        w.uint16(curve)
        w.uint16(0x0010)
        w.sized([UInt8](repeating: 1, count: coordinate))
        w.sized([UInt8](repeating: 2, count: coordinate))
        return w.bytes
    }

    func testAPublicAreaIsReadAndNamed() throws {
        let bytes = publicArea()
        let area = try TPMPublicArea(bytes)
        XCTAssertEqual(area.curve, .p256)
        XCTAssertEqual(area.nameAlgorithm, .sha256)
        XCTAssertTrue(area.attributes.isSuperset(of: [.restricted, .sign, .fixedTPM]))
        XCTAssertFalse(area.attributes.contains(.decrypt))
        XCTAssertNil(area.symmetricKeyBits)
        XCTAssertEqual(area.x963, [4] + [UInt8](repeating: 1, count: 32) + [UInt8](repeating: 2, count: 32))
        XCTAssertEqual(area.name, [0x00, 0x0B] + Array(SHA256.hash(data: bytes)))
        XCTAssertEqual(try TPMPublicArea(publicArea(symmetric: true)).symmetricKeyBits, 128)
    }

    func testEveryMalformedPublicAreaIsRefused() {
        let good = publicArea()
        let cases: [([UInt8], TPMWireError, String)] = [
            (Array(good.dropLast()), .truncated, "one byte short"),
            (good + [0], .trailingBytes, "one byte long"),
            ([], .truncated, "empty"),
            (publicArea(nameAlg: 0x0004), .unsupported("name algorithm 4"), "SHA-1"),
            (publicArea(curve: 0x0005), .unsupported("curve 5"), "an unknown curve"),
            (publicArea(scheme: 0x001A), .unsupported("scheme 26"), "ECDAA, whose details carry a count too"),
            (
                publicArea(coordinate: 31), .unsupported("a point whose coordinates are not its curve's size"),
                "a short coordinate"
            ),
            ([0x00, 0x01] + good.dropFirst(2), .unsupported("a public area not of an ECC key"), "RSA"),
        ]
        for (bytes, expected, why) in cases {
            XCTAssertThrowsError(try TPMPublicArea(bytes), why) { XCTAssertEqual($0 as? TPMWireError, expected, why) }
        }
    }

    func testACertifyStatementIsReadAndAnyOtherRefused() throws {
        var w = TPMWriter()
        w.uint32(TPMCertifyStatement.generatedMagic)
        w.uint16(TPMCertifyStatement.certifyType)
        w.sized([0x00, 0x0B] + [UInt8](repeating: 7, count: 32))
        w.sized([UInt8](repeating: 9, count: 32))
        w.raw([0, 0, 0, 0, 0, 0, 0x10, 0])  // clock
        w.uint32(3)
        w.uint32(4)
        w.raw([1])
        w.raw([0, 0, 0, 0, 0x20, 0x19, 0x10, 0x23])
        w.sized([0x00, 0x0B] + [UInt8](repeating: 5, count: 32))
        w.sized([0x00, 0x0B] + [UInt8](repeating: 6, count: 32))
        let statement = try TPMCertifyStatement(w.bytes)
        XCTAssertEqual(statement.extraData, [UInt8](repeating: 9, count: 32))
        XCTAssertEqual(statement.certifiedName, [0x00, 0x0B] + [UInt8](repeating: 5, count: 32))
        XCTAssertEqual(statement.resetCount, 3)
        XCTAssertEqual(statement.restartCount, 4)
        XCTAssertTrue(statement.safe)
        XCTAssertEqual(statement.clock, 0x1000)

        var notTheTPMs = w.bytes
        notTheTPMs[0] = 0
        XCTAssertThrowsError(try TPMCertifyStatement(notTheTPMs)) {
            XCTAssertEqual($0 as? TPMWireError, .unsupported("a statement the TPM did not make"))
        }
        var quote = w.bytes
        quote[5] = 0x18  // TPM_ST_ATTEST_QUOTE
        XCTAssertThrowsError(try TPMCertifyStatement(quote))
        XCTAssertThrowsError(try TPMCertifyStatement(w.bytes.dropLast()))
        XCTAssertThrowsError(try TPMCertifyStatement(w.bytes + [0]))
    }

    func testTheKeyDerivationsGiveWhatIsAskedAndDifferByLabel() {
        let key = [UInt8](repeating: 3, count: 32)
        let storage = TPMCredential.kdfA(.sha256, key: key, label: "STORAGE", contextU: [1], contextV: [], bits: 128)
        let integrity = TPMCredential.kdfA(
            .sha256,
            key: key,
            label: "INTEGRITY",
            contextU: [1],
            contextV: [],
            bits: 128
        )
        XCTAssertEqual(storage.count, 16)
        XCTAssertNotEqual(storage, integrity)
        XCTAssertEqual(
            TPMCredential.kdfA(.sha384, key: key, label: "X", contextU: [], contextV: [], bits: 512).count,
            64
        )
        let long = TPMCredential.kdfE(.sha256, z: key, label: "IDENTITY", partyU: [1], partyV: [2], bits: 384)
        XCTAssertEqual(long.count, 48)
        XCTAssertEqual(
            Array(long.prefix(32)),
            Array(SHA256.hash(data: [0, 0, 0, 1] + key + Array("IDENTITY".utf8) + [0, 1, 2])),
            "KDFe's first block is the hash of the counter, Z, the label with its zero, and the parties"
        )
        XCTAssertNotEqual(
            TPMCredential.kdfE(.sha256, z: key, label: "IDENTITY", partyU: [1], partyV: [2], bits: 256),
            TPMCredential.kdfE(.sha256, z: key, label: "IDENTITY", partyU: [2], partyV: [1], bits: 256)
        )
    }
}
