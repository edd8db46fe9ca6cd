import Crypto
import EnclaveCore
import Foundation
import XCTest

/// `ItemSealing`: a keychain secret sealed under its own key, wrapped under its class key.
final class ItemSealingTests: XCTestCase {
    private let identity = Data("1000\u{1F}/usr/bin/app\u{1F}genp".utf8)

    func testASealOpensOnlyWithItsClassKeyIdentityAndPassword() throws {
        let classKey = SymmetricKey(size: .bits256)
        let sealed = try ItemSealing.seal(Data("secret".utf8), key: classKey, identity: identity)
        XCTAssertEqual(try ItemSealing.open(sealed, key: classKey, identity: identity), Data("secret".utf8))
        XCTAssertThrowsError(try ItemSealing.open(sealed, key: SymmetricKey(size: .bits256), identity: identity)) {
            XCTAssertEqual(($0 as? CoreError)?.code, .wrongKeyOrTampered)
        }
        XCTAssertThrowsError(try ItemSealing.open(sealed, key: classKey, identity: identity + Data([0])))

        let guarded = try ItemSealing.seal(
            Data("pw".utf8),
            key: classKey,
            identity: identity,
            applicationPassword: Data("open sesame".utf8)
        )
        XCTAssertThrowsError(try ItemSealing.open(guarded, key: classKey, identity: identity)) {
            XCTAssertEqual(($0 as? CoreError)?.code, .applicationPasswordNeeded)
        }
        XCTAssertThrowsError(
            try ItemSealing.open(guarded, key: classKey, identity: identity, applicationPassword: Data("wrong".utf8))
        ) {
            XCTAssertEqual(($0 as? CoreError)?.code, .wrongApplicationPassword)
        }
        XCTAssertEqual(
            try ItemSealing.open(
                guarded,
                key: classKey,
                identity: identity,
                applicationPassword: Data("open sesame".utf8)
            ),
            Data("pw".utf8)
        )
    }

    /// The upgrade from the key the master key derived to a class key: only the wrap changes.
    func testRewrapMovesTheItemKeyAndLeavesTheSecretAndPasswordLayer() throws {
        let legacy = ItemSealing.legacyUserKey(master: SymmetricKey(size: .bits256), uid: 1000)
        let classKey = SymmetricKey(size: .bits256)
        for password in [nil, Data("pw".utf8)] {
            let old = try ItemSealing.seal(
                Data("secret".utf8),
                key: legacy,
                identity: identity,
                applicationPassword: password
            )
            let new = try ItemSealing.rewrap(old, from: legacy, to: classKey, identity: identity)
            XCTAssertEqual(new.ciphertext, old.ciphertext)
            XCTAssertEqual(new.passwordSalt, old.passwordSalt)
            XCTAssertNotEqual(new.wrappedKey, old.wrappedKey)
            XCTAssertEqual(
                try ItemSealing.open(new, key: classKey, identity: identity, applicationPassword: password),
                Data("secret".utf8)
            )
            XCTAssertThrowsError(
                try ItemSealing.open(new, key: legacy, identity: identity, applicationPassword: password)
            )
            XCTAssertThrowsError(
                try ItemSealing.rewrap(old, from: classKey, to: legacy, identity: identity),
                "not wrapped under that key"
            )
        }
    }
}
