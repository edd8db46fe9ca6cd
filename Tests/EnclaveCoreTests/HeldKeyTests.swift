import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// `HeldKey`: which Secure Enclave key an item stored before `heldKey` holds.
final class HeldKeyTests: XCTestCase {
    private let blob = Data("LAK1".utf8) + Data(repeating: 9, count: 40)
    private let publicKey = Data([0x04]) + Data(repeating: 1, count: 64)

    func testKeyItemsAndRightsHoldTheirBlobsAndNothingElseDoes() throws {
        let right = try JSONSerialization.data(withJSONObject: [
            "requirement": "biometry", "keyBlob": blob.base64EncodedString(), "publicKey": "", "hasSecret": false,
        ])
        let enclaveToken: KeychainValue = .string(KeyHoldingItems.secureEnclaveToken)
        let cases: [(String, String, [String: KeychainValue], Data, Data?)] = [
            ("an enclave key item", "keys", ["tkid": enclaveToken], publicKey + blob, blob),
            ("a software key item", "keys", [:], publicKey + blob, nil),
            ("an enclave key item without a key", "keys", ["tkid": enclaveToken], publicKey, nil),
            (
                "an enclave key item with no public key first", "keys", ["tkid": enclaveToken],
                Data([0x02]) + blob + blob, nil
            ),
            (
                "a right", "genp", ["svce": .string(KeyHoldingItems.rightStoreService), "gena": .data(right)], Data(),
                blob
            ),
            (
                "a right's record damaged", "genp",
                ["svce": .string(KeyHoldingItems.rightStoreService), "gena": .data(Data("{".utf8))], Data(), nil
            ),
            ("another password", "genp", ["svce": .string("mail"), "gena": .data(right)], Data(), nil),
            ("an internet password", "inet", ["tkid": enclaveToken], publicKey + blob, nil),
        ]
        for (name, itemClass, attributes, secret, expected) in cases {
            XCTAssertEqual(HeldKey.blob(itemClass: itemClass, attributes: attributes, secret: secret), expected, name)
        }
    }
}
