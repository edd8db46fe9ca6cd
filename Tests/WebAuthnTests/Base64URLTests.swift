import Foundation
import WebAuthn
import XCTest

final class Base64URLTests: XCTestCase {
    /// RFC 4648 §10 test vectors (identical in base64url for these inputs), unpadded on output.
    func testRFC4648Vectors() {
        let vectors = [
            "": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy",
        ]
        for (plain, encoded) in vectors {
            XCTAssertEqual(Data(plain.utf8).base64URLEncodedString(), encoded)
            XCTAssertEqual(Data(base64URLEncoded: encoded), Data(plain.utf8))
        }
    }

    func testUsesURLSafeAlphabet() {
        let bytes = Data([0xFB, 0xFF, 0xBF])
        XCTAssertEqual(bytes.base64URLEncodedString(), "-_-_")
        XCTAssertEqual(Data(base64URLEncoded: "-_-_"), bytes)
    }

    func testAcceptsCorrectPadding() {
        XCTAssertEqual(Data(base64URLEncoded: "Zg=="), Data("f".utf8))
        XCTAssertEqual(Data(base64URLEncoded: "Zm8="), Data("fo".utf8))
    }

    func testRejectsWrongPadding() {
        for bad in ["Zg=", "Zg===", "Zm9v=", "Zm9v====", "=", "Z=g="] {
            XCTAssertNil(Data(base64URLEncoded: bad), bad)
        }
    }

    func testRejectsCharactersOutsideTheAlphabet() {
        for bad in ["Zm9v+", "Zm9v/A", "Zm 9v", "Zm9v\n", "Zm9vé", "Zm9v.", "Zm9v\u{0}"] {
            XCTAssertNil(Data(base64URLEncoded: bad), bad.debugDescription)
        }
    }

    func testRejectsImpossibleLength() {
        XCTAssertNil(Data(base64URLEncoded: "Z"))
        XCTAssertNil(Data(base64URLEncoded: "Zm9vY"))
    }

    func testRandomRoundTrips() {
        for length in 0..<70 {
            let bytes = Data((0..<length).map { _ in UInt8.random(in: 0...255) })
            let encoded = bytes.base64URLEncodedString()
            XCTAssertFalse(encoded.contains("="))
            XCTAssertEqual(Data(base64URLEncoded: encoded), bytes)
        }
    }
}
