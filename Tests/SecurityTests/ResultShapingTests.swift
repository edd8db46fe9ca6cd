import EnclaveProtocol
import Foundation
import XCTest

@testable import Security

final class ResultShapingTests: XCTestCase {
    private let date = Date(timeIntervalSinceReferenceDate: 700_000_000)
    private var item1: KeychainItem {
        KeychainItem(
            attributes: [
                "class": .string("genp"), "acct": .string("alice"), "port": .int(443),
                "sync": .bool(false), "cdat": .date(date),
            ],
            data: Data("one".utf8),
            persistentRef: Data([1])
        )
    }
    private let item2 = KeychainItem(
        attributes: ["acct": .string("bob")],
        data: Data("two".utf8),
        persistentRef: Data([2])
    )

    private func request(data: Bool = false, attrs: Bool = false, ref: Bool = false) -> KeychainRequest {
        KeychainRequest(
            attributes: [:],
            context: "",
            returnData: data,
            returnAttributes: attrs,
            returnPersistentRef: ref
        )
    }

    private func shape(
        _ items: [KeychainItem],
        _ r: KeychainRequest,
        limit: Int? = nil,
        op: KeychainOperation = .copy,
        status: OSStatus = errSecSuccess
    ) -> (OSStatus, CFTypeRef?) {
        SecItemMarshaling.shape(
            KeychainReply(status: KeychainStatus(rawValue: status), items: items),
            for: SecItemCall(request: r, context: nil, limit: limit),
            operation: op
        )
    }

    func testOnlyDataGivesData() {
        let (s, r) = shape([item1], request(data: true))
        XCTAssertEqual(s, errSecSuccess)
        XCTAssertTrue(r is NSData)
        XCTAssertEqual(r as? Data, Data("one".utf8))
        XCTAssertEqual(String(data: r as! Data, encoding: .utf8), "one")
    }

    func testOnlyPersistentRefGivesData() {
        XCTAssertEqual(shape([item1], request(ref: true)).1 as? Data, Data([1]))
    }

    func testAttributesGiveDictionary() {
        let (s, r) = shape([item1], request(attrs: true))
        XCTAssertEqual(s, errSecSuccess)
        XCTAssertTrue(r is NSDictionary)
        let d = r as? [String: Any]
        XCTAssertEqual(d?[kSecAttrAccount as String] as? String, "alice")
        XCTAssertEqual(d?["port"] as? Int, 443)
        XCTAssertEqual(d?["sync"] as? Bool, false)
        XCTAssertEqual(d?[kSecAttrCreationDate as String] as? Date, date)
        XCTAssertNil(d?["v_Data"])
    }

    func testSeveralReturnKeysGiveDictionary() {
        let d = shape([item1], request(data: true, attrs: true, ref: true)).1 as? [String: Any]
        XCTAssertEqual(d?[kSecValueData as String] as? Data, Data("one".utf8))
        XCTAssertEqual(d?[kSecValuePersistentRef as String] as? Data, Data([1]))
        XCTAssertEqual(d?["acct"] as? String, "alice")

        let e = shape([item1], request(data: true, ref: true)).1 as? [String: Any]
        XCTAssertEqual(e?.keys.sorted(), ["v_Data", "v_PersistentRef"])
    }

    func testMatchAllGivesArray() {
        let (s, r) = shape([item1, item2], request(data: true), limit: .max)
        XCTAssertEqual(s, errSecSuccess)
        XCTAssertTrue(r is NSArray)
        XCTAssertEqual((r as? [Data])?.count, 2)
        XCTAssertEqual((r as? [Data])?.last, Data("two".utf8))

        let dicts = shape([item1, item2], request(attrs: true), limit: .max).1 as? [[String: Any]]
        XCTAssertEqual(dicts?.compactMap { $0["acct"] as? String }, ["alice", "bob"])

        let one = shape([item1], request(data: true), limit: .max).1
        XCTAssertTrue(one is NSArray, "match-all answers an array even for one item")
    }

    func testCountLimitTruncates() {
        let r = shape([item1, item2, item1], request(data: true), limit: 2).1 as? [Data]
        XCTAssertEqual(r?.count, 2)
    }

    func testMatchOneTakesFirst() {
        XCTAssertEqual(shape([item2, item1], request(data: true)).1 as? Data, Data("two".utf8))
    }

    func testFailuresAndEmptyResults() {
        let (s, r) = shape([item1], request(data: true), status: errSecAuthFailed)
        XCTAssertEqual(s, errSecAuthFailed)
        XCTAssertNil(r)
        XCTAssertEqual(shape([], request(data: true)).0, errSecItemNotFound)
        XCTAssertEqual(shape([], request(data: true), op: .add).0, errSecSuccess)
        let none = shape([item1], request())
        XCTAssertEqual(none.0, errSecSuccess)
        XCTAssertNil(none.1)
        let noData = KeychainItem(attributes: [:], data: nil, persistentRef: nil)
        XCTAssertEqual(shape([noData], request(data: true)).0, errSecDecode)
    }

    func testAddReturnsAddedItemNeverArray() {
        let r = shape([item1], request(attrs: true), limit: .max, op: .add).1
        XCTAssertTrue(r is NSDictionary)
    }

    // End to end through the public functions, with a synthetic transport.
    func testSecItemFunctionsWithSyntheticReply() {
        let saved = secItemTransport
        defer { secItemTransport = saved }
        var seen: [(KeychainOperation, KeychainRequest)] = []
        let reply = KeychainReply(status: .success, items: [item1, item2])
        secItemTransport = { op, r, _ in
            seen.append((op, r))
            return reply
        }

        var item: CFTypeRef?
        let q: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true,
            kSecMatchLimit as String: kSecMatchLimitAll,
        ]
        XCTAssertEqual(SecItemCopyMatching(q as CFDictionary, &item), errSecSuccess)
        XCTAssertEqual((item as? [Data])?.count, 2)
        XCTAssertEqual(seen.last?.0, .copy)
        XCTAssertEqual(seen.last?.1.matchAll, true)

        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecValueData as String: Data([1]),
            kSecReturnAttributes as String: true,
        ]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, &item), errSecSuccess)
        XCTAssertEqual((item as? [String: Any])?["acct"] as? String, "alice")
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)

        XCTAssertEqual(
            SecItemUpdate(q as CFDictionary, [kSecValueData as String: Data([2])] as CFDictionary),
            errSecSuccess
        )
        XCTAssertEqual(seen.last?.0, .update)
        XCTAssertEqual(seen.last?.1.changes, ["v_Data": .data(Data([2]))])
        XCTAssertEqual(SecItemDelete(q as CFDictionary), errSecSuccess)
        XCTAssertEqual(seen.last?.0, .delete)

        secItemTransport = { _, _, _ in KeychainReply(status: .invalidItemRef, message: "enrolment changed") }
        XCTAssertEqual(SecItemCopyMatching(q as CFDictionary, &item), errSecInvalidItemRef)
        XCTAssertNil(item, "result is cleared on failure")
    }
}
