import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// `KeyBlob`: a Secure Enclave key's sealed `dataRepresentation`.
final class KeyBlobTests: XCTestCase {
    private let keyKey = SymmetricKey(size: .bits256)
    private let handle = KeyHandle.random()
    private let key = KeyBlob(
        kind: .signing,
        privateKey: P256.Signing.PrivateKey().rawRepresentation,
        protection: .whenPasscodeSetThisDeviceOnly,
        flags: [.biometryCurrentSet, .privateKeyUsage],
        enrolmentGeneration: 4,
        passcodeEpoch: 2
    )

    func testOpensOnlyForItsUserAppKindAndKey() throws {
        let blob = try key.sealed(key: keyKey, handle: handle, uid: 1000, app: "/usr/bin/a")
        XCTAssertEqual(KeyBlob.open(blob, kind: .signing, key: keyKey, uid: 1000, app: "/usr/bin/a"), key)
        XCTAssertNil(KeyBlob.open(blob, kind: .signing, key: keyKey, uid: 1001, app: "/usr/bin/a"), "another user")
        XCTAssertNil(KeyBlob.open(blob, kind: .signing, key: keyKey, uid: 1000, app: "/usr/bin/b"), "another app")
        XCTAssertNil(KeyBlob.open(blob, kind: .keyAgreement, key: keyKey, uid: 1000, app: "/usr/bin/a"), "another kind")
        XCTAssertNil(
            KeyBlob.open(blob, kind: .signing, key: SymmetricKey(size: .bits256), uid: 1000, app: "/usr/bin/a"),
            "another record's key"
        )
        var flipped = blob
        flipped[flipped.count - 1] ^= 1
        XCTAssertNil(KeyBlob.open(flipped, kind: .signing, key: keyKey, uid: 1000, app: "/usr/bin/a"), "tampered")
        var otherHandle = blob
        otherHandle[5] ^= 1
        XCTAssertNil(
            KeyBlob.open(otherHandle, kind: .signing, key: keyKey, uid: 1000, app: "/usr/bin/a"),
            "its handle is sealed with it"
        )
        XCTAssertNil(
            KeyBlob.open(Data("LAK2".utf8) + handle.bytes, kind: .signing, key: keyKey, uid: 1000, app: "/usr/bin/a"),
            "truncated"
        )
    }

    func testTheHandleNamesTheRecordAndALegacyBlobIsNamedByItsDigest() throws {
        let blob = try key.sealed(key: keyKey, handle: handle, uid: 1000, app: "/usr/bin/a")
        XCTAssertEqual(KeyBlob.handle(of: blob), handle)
        XCTAssertFalse(handle.isLegacy)
        let legacy = Data("LAK1".utf8) + Data(repeating: 7, count: 60)
        XCTAssertEqual(KeyBlob.handle(of: legacy), KeyHandle(Data(SHA256.hash(data: legacy))))
        XCTAssertTrue(KeyBlob.handle(of: legacy)!.isLegacy)
        for junk in [nil, Data(), Data("LAK2".utf8), Data("LAK2".utf8) + Data(count: 16), Data("XYZW-something".utf8)] {
            XCTAssertNil(KeyBlob.handle(of: junk), "\(junk as Any)")
        }
    }

    /// Blobs made before key records (`LAK1`, under the user's derived key; protection as a
    /// string, flags as a number) still open, as legacy ones.
    func testALegacyBlobOpensWithTheLegacyKeyOnly() throws {
        let userKey = SymmetricKey(size: .bits256)
        let legacy =
            #"{"kind":"signing","privateKey":"\#(key.privateKey.base64EncodedString())","protection":"akpu","flags":1073741832,"enrolmentGeneration":4,"passcodeEpoch":2}"#
        let box = try AES.GCM.seal(
            Data(legacy.utf8),
            using: userKey,
            authenticating: Data("secure-enclave-key\u{1F}7\u{1F}/app".utf8)
        )
        let blob = Data("LAK1".utf8) + box.combined!
        XCTAssertEqual(KeyBlob.openLegacy(blob, kind: .signing, userKey: userKey, uid: 7, app: "/app"), key)
        XCTAssertNil(KeyBlob.openLegacy(blob, kind: .signing, userKey: userKey, uid: 7, app: "/other"))
        XCTAssertNil(KeyBlob.open(blob, kind: .signing, key: userKey, uid: 7, app: "/app"), "not a recorded key")
    }

    func testItsPlanFollowsWhatWasRecorded() {
        XCTAssertEqual(
            AccessPlan(key.protected, now: .init(enrolmentGeneration: 4, passcodeEpoch: 2, passcodeSet: true)),
            .prove([.biometric])
        )
        XCTAssertEqual(
            AccessPlan(key.protected, now: .init(enrolmentGeneration: 5, passcodeEpoch: 2, passcodeSet: true)),
            .invalidated(.enrolmentChanged)
        )
        XCTAssertEqual(
            AccessPlan(key.protected, now: .init(enrolmentGeneration: 4, passcodeEpoch: 3, passcodeSet: true)),
            .invalidated(.passcodeRemoved)
        )
    }
}
