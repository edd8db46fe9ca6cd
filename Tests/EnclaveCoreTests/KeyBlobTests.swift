import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// `KeyBlob`: a Secure Enclave key's sealed `dataRepresentation`.
final class KeyBlobTests: XCTestCase {
    private let userKey = SymmetricKey(size: .bits256)
    private let key = KeyBlob(kind: .signing, privateKey: P256.Signing.PrivateKey().rawRepresentation, protection: .whenPasscodeSetThisDeviceOnly,
                              flags: [.biometryCurrentSet, .privateKeyUsage], enrolmentGeneration: 4, passcodeEpoch: 2)

    func testOpensOnlyForItsUserAppKindAndKey() throws {
        let blob = try key.sealed(userKey: userKey, uid: 1000, app: "/usr/bin/a")
        XCTAssertEqual(KeyBlob.open(blob, kind: .signing, userKey: userKey, uid: 1000, app: "/usr/bin/a"), key)
        XCTAssertNil(KeyBlob.open(blob, kind: .signing, userKey: userKey, uid: 1001, app: "/usr/bin/a"), "another user")
        XCTAssertNil(KeyBlob.open(blob, kind: .signing, userKey: userKey, uid: 1000, app: "/usr/bin/b"), "another app")
        XCTAssertNil(KeyBlob.open(blob, kind: .keyAgreement, userKey: userKey, uid: 1000, app: "/usr/bin/a"), "another kind")
        XCTAssertNil(KeyBlob.open(blob, kind: .signing, userKey: SymmetricKey(size: .bits256), uid: 1000, app: "/usr/bin/a"), "another daemon")
        var flipped = blob
        flipped[flipped.count - 1] ^= 1
        XCTAssertNil(KeyBlob.open(flipped, kind: .signing, userKey: userKey, uid: 1000, app: "/usr/bin/a"), "tampered")
        XCTAssertNil(KeyBlob.open(Data("LAK1".utf8), kind: .signing, userKey: userKey, uid: 1000, app: "/usr/bin/a"), "truncated")
        XCTAssertNil(KeyBlob.open(nil, kind: .signing, userKey: userKey, uid: 1000, app: "/usr/bin/a"))
    }

    /// Blobs made before the typed vocabulary (protection as a string, flags as a number) still open.
    func testTheStoredFormIsUnchanged() throws {
        let legacy = #"{"kind":"signing","privateKey":"\#(key.privateKey.base64EncodedString())","protection":"akpu","flags":1073741832,"enrolmentGeneration":4,"passcodeEpoch":2}"#
        let box = try AES.GCM.seal(Data(legacy.utf8), using: userKey, authenticating: Data("secure-enclave-key\u{1F}7\u{1F}/app".utf8))
        XCTAssertEqual(KeyBlob.open(Data("LAK1".utf8) + box.combined!, kind: .signing, userKey: userKey, uid: 7, app: "/app"), key)
    }

    func testItsPlanFollowsWhatWasRecorded() {
        XCTAssertEqual(AccessPlan(key.protected, now: .init(enrolmentGeneration: 4, passcodeEpoch: 2, passcodeSet: true)), .prove([.biometric]))
        XCTAssertEqual(AccessPlan(key.protected, now: .init(enrolmentGeneration: 5, passcodeEpoch: 2, passcodeSet: true)), .invalidated(.enrolmentChanged))
        XCTAssertEqual(AccessPlan(key.protected, now: .init(enrolmentGeneration: 4, passcodeEpoch: 3, passcodeSet: true)), .invalidated(.passcodeRemoved))
    }
}
