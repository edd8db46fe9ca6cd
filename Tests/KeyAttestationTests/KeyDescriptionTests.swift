import EnclaveProtocol
import KeyAttestation
import SwiftASN1
import XCTest

final class KeyDescriptionTests: XCTestCase {
    func testEveryDescriptionSurvivesItsDEREncoding() throws {
        for mode in [DaemonMode.system, .user] {
            for sensor in KeyDescription.Sensor.allCases {
                for kind in KeyRequest.Kind.allCases {
                    for protection in Protection.allCases {
                        let d = KeyDescription(
                            daemonMode: mode,
                            sensor: sensor,
                            simulationAllowed: sensor == .simulated,
                            keyKind: kind,
                            protection: protection,
                            accessControl: [.privateKeyUsage, .biometryCurrentSet]
                        )
                        XCTAssertEqual(try KeyDescription(derBytes: try d.derBytes()), d)
                    }
                }
            }
        }
    }

    func testUserVerificationOnEveryUseNeedsPrivateKeyUsageAndAConstraint() {
        let table: [(AccessControlFlags, Bool)] = [
            ([.privateKeyUsage, .biometryCurrentSet], true),
            ([.privateKeyUsage, .biometryAny], true),
            ([.privateKeyUsage, .userPresence], true),
            ([.privateKeyUsage, .devicePasscode], true),
            ([.privateKeyUsage, .biometryAny, .or, .devicePasscode], true),
            ([.privateKeyUsage], false),
            ([.biometryCurrentSet], false),
            ([], false),
            ([.privateKeyUsage, .companion], false),
        ]
        for (flags, expected) in table {
            let d = KeyDescription(
                daemonMode: .system,
                sensor: .fprintd,
                simulationAllowed: false,
                keyKind: .signing,
                protection: .whenPasscodeSetThisDeviceOnly,
                accessControl: flags
            )
            XCTAssertEqual(d.needsUserAuthentication, expected, flags.names)
        }
    }

    func testAnotherVersionOrAnUnknownWordIsRefused() throws {
        func encoded(version: Int, mode: String) throws -> [UInt8] {
            var s = DER.Serializer()
            try s.appendConstructedNode(identifier: .sequence) { c in
                try c.serialize(version)
                try c.serialize(ASN1UTF8String(mode))
                try c.serialize(ASN1UTF8String("fprintd"))
                try c.serialize(false)
                try c.serialize(ASN1UTF8String("signing"))
                try c.serialize(ASN1UTF8String("akpu"))
                try c.serialize(UInt64(1 << 30 | 1 << 3))
            }
            return s.serializedBytes
        }
        XCTAssertNoThrow(try KeyDescription(derBytes: try encoded(version: 1, mode: "system")))
        XCTAssertThrowsError(try KeyDescription(derBytes: try encoded(version: 2, mode: "system")))
        XCTAssertThrowsError(try KeyDescription(derBytes: try encoded(version: 1, mode: "root")))
        XCTAssertThrowsError(try KeyDescription(derBytes: Array(try encoded(version: 1, mode: "system").dropLast())))
    }
}
