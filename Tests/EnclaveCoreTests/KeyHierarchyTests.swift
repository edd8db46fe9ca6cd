import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// `KeyHierarchy` and `KeyClass`: what wraps what, and what a wrap is bound to.
final class KeyHierarchyTests: XCTestCase {
    func testOnlyWhenPasscodeSetItemsAreInThePasscodeClass() {
        for protection in Protection.allCases {
            XCTAssertEqual(
                KeyClass(protection),
                protection == .whenPasscodeSetThisDeviceOnly ? .passcodeSet : .standard,
                "\(protection)"
            )
        }
    }

    func testTheWrappingKeyIsPerUserAndPerMasterKey() {
        let master = SymmetricKey(size: .bits256)
        let a = KeyHierarchy.wrappingKey(master: master, uid: 1000)
        XCTAssertEqual(a, KeyHierarchy.wrappingKey(master: master, uid: 1000))
        XCTAssertNotEqual(a, KeyHierarchy.wrappingKey(master: master, uid: 1001))
        XCTAssertNotEqual(a, KeyHierarchy.wrappingKey(master: SymmetricKey(size: .bits256), uid: 1000))
        XCTAssertNotEqual(
            a,
            ItemSealing.legacyUserKey(master: master, uid: 1000),
            "not the key items were sealed under before"
        )
    }

    func testAWrapOpensOnlyUnderItsKeyAndForWhatItNames() throws {
        let kek = SymmetricKey(size: .bits256)
        let key = SymmetricKey(size: .bits256)
        let context = KeyHierarchy.classKeyContext(uid: 1000, .standard)
        let wrapped = try KeyHierarchy.wrap(key, under: kek, context: context)
        XCTAssertEqual(KeyHierarchy.unwrap(wrapped, under: kek, context: context), key)
        let cases: [(String, Data, SymmetricKey)] = [
            ("another class", KeyHierarchy.classKeyContext(uid: 1000, .passcodeSet), kek),
            ("another user", KeyHierarchy.classKeyContext(uid: 1001, .standard), kek),
            ("an enclave key's context", KeyHierarchy.enclaveKeyContext(uid: 1000, handle: Data(count: 16)), kek),
            ("another key", context, SymmetricKey(size: .bits256)),
        ]
        for (name, otherContext, otherKey) in cases {
            XCTAssertNil(KeyHierarchy.unwrap(wrapped, under: otherKey, context: otherContext), name)
        }
        XCTAssertNil(KeyHierarchy.unwrap(Data(wrapped.dropLast()), under: kek, context: context), "truncated")
        XCTAssertNil(KeyHierarchy.unwrap(Data(), under: kek, context: context))
    }
}
