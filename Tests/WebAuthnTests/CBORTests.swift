import Foundation
import XCTest

@testable import WebAuthn

final class CBORTests: XCTestCase {
    // MARK: RFC 8949 Appendix A

    /// Examples from RFC 8949 Appendix A for the supported types, all in shortest form, so each
    /// must decode to the value and re-encode to the same bytes.
    func testAppendixAExamplesDecodeAndReencode() throws {
        let examples: [(String, CBOR)] = [
            ("00", .unsigned(0)), ("01", .unsigned(1)), ("0a", .unsigned(10)), ("17", .unsigned(23)),
            ("1818", .unsigned(24)), ("1819", .unsigned(25)), ("1864", .unsigned(100)),
            ("1903e8", .unsigned(1000)), ("1a000f4240", .unsigned(1_000_000)),
            ("1b000000e8d4a51000", .unsigned(1_000_000_000_000)),
            ("1bffffffffffffffff", .unsigned(UInt64.max)),
            ("3bffffffffffffffff", .negative(UInt64.max)),  // -18446744073709551616
            ("20", .int(-1)), ("29", .int(-10)), ("3863", .int(-100)), ("3903e7", .int(-1000)),
            ("f90000", .float(0.0)), ("f98000", .float(-0.0)), ("f93c00", .float(1.0)),
            ("fb3ff199999999999a", .float(1.1)), ("f93e00", .float(1.5)), ("f97bff", .float(65504.0)),
            ("fa47c35000", .float(100000.0)), ("fa7f7fffff", .float(3.4028234663852886e+38)),
            ("fb7e37e43c8800759c", .float(1.0e+300)), ("f90001", .float(5.960464477539063e-8)),
            ("f90400", .float(0.00006103515625)), ("f9c400", .float(-4.0)),
            ("fbc010666666666666", .float(-4.1)), ("f97c00", .float(.infinity)),
            ("f97e00", .float(.nan)), ("f9fc00", .float(-.infinity)),
            ("f4", .bool(false)), ("f5", .bool(true)), ("f6", .null), ("f7", .undefined),
            ("40", .bytes(Data())), ("4401020304", .bytes(Data([1, 2, 3, 4]))),
            ("60", .text("")), ("6161", .text("a")), ("6449455446", .text("IETF")),
            ("62225c", .text("\"\\")), ("62c3bc", .text("\u{00fc}")), ("63e6b0b4", .text("\u{6c34}")),
            ("64f0908591", .text("\u{10151}")),
            ("80", .array([])), ("83010203", .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
            (
                "8301820203820405",
                .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])])
            ),
            (
                "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
                .array((1...25).map { .unsigned(UInt64($0)) })
            ),
            ("a0", .map([])),
            ("a201020304", .map([(key: .unsigned(1), value: .unsigned(2)), (key: .unsigned(3), value: .unsigned(4))])),
            (
                "a26161016162820203",
                .map([
                    (key: .text("a"), value: .unsigned(1)),
                    (key: .text("b"), value: .array([.unsigned(2), .unsigned(3)])),
                ])
            ),
            ("826161a161626163", .array([.text("a"), .map([(key: .text("b"), value: .text("c"))])])),
            (
                "a56161614161626142616361436164614461656145",
                .map(["a", "b", "c", "d", "e"].map { (key: .text($0), value: .text($0.uppercased())) })
            ),
        ]
        for (hex, expected) in examples {
            let decoded = try CBOR.decode(Data(hex: hex))
            XCTAssertEqual(decoded, expected, hex)
            XCTAssertEqual(decoded.encoded().hex, hex, "re-encoding \(hex)")
        }
    }

    /// Appendix A also encodes some values non-minimally; they decode to the same value.
    func testNonShortestFloatsDecode() throws {
        XCTAssertEqual(try CBOR.decode(Data(hex: "fa7f800000")), .float(.infinity))
        XCTAssertEqual(try CBOR.decode(Data(hex: "fb7ff8000000000000")), .float(.nan))
        XCTAssertEqual(try CBOR.decode(Data(hex: "fbfff0000000000000")), .float(-.infinity))
    }

    /// Every NaN decodes to the one NaN the encoder writes, so decode → encode → decode is stable
    /// (the fuzzer's find: `f9ff3c`, a half NaN with its sign and a payload, came back different).
    func testEveryNaNDecodesToTheCanonicalOne() throws {
        for hex in [
            "f97e00", "f9ff3c", "f97c01", "fa7fc00001", "faffffffff", "fb7ff8000000000001", "fbfff8000000000000",
        ] {
            let value = try CBOR.decode(Data(hex: hex))
            XCTAssertEqual(value, .float(.nan), hex)
            XCTAssertEqual(try CBOR.decode(value.encoded()), value, hex)
        }
        let found = try CBOR.decode(
            Data(hex: "a182a18261 61f9ff3c6161f93c0040".replacingOccurrences(of: " ", with: ""))
        )
        XCTAssertEqual(try CBOR.decode(found.encoded()), found, "the fuzzer's input round-trips")
    }

    func testNegativeIntegerValues() throws {
        XCTAssertEqual(try CBOR.decode(Data(hex: "26")).intValue, -7)
        XCTAssertEqual(CBOR.int(-7).encoded().hex, "26")
        XCTAssertEqual(CBOR.int(-257).encoded().hex, "390100")
        XCTAssertNil(CBOR.negative(UInt64.max).intValue)
        XCTAssertEqual(CBOR.negative(UInt64(Int.max)).intValue, Int.min)
    }

    // MARK: Round trips

    func testNestedValueRoundTrips() throws {
        let value: CBOR = .map([
            (key: .text("fmt"), value: .text("none")),
            (key: .int(-3), value: .bytes(Data(repeating: 7, count: 300))),
            (
                key: .int(70000),
                value: .array([
                    .bool(true), .null, .undefined, .float(0.1), .text(String(repeating: "x", count: 70_000)),
                ])
            ),
        ])
        let encoded = value.encoded()
        XCTAssertEqual(try CBOR.decode(encoded), value)
        XCTAssertEqual(try CBOR.decode(encoded).encoded(), encoded)
    }

    func testEncodesMapKeysInGivenOrder() {
        let value: CBOR = .map([(key: .unsigned(3), value: .unsigned(0)), (key: .unsigned(1), value: .unsigned(0))])
        XCTAssertEqual(value.encoded().hex, "a203000100")
    }

    func testDecodePrefixReportsLength() throws {
        let (value, length) = try CBOR.decodePrefix(Data(hex: "8201021234"))
        XCTAssertEqual(value, .array([.unsigned(1), .unsigned(2)]))
        XCTAssertEqual(length, 3)
    }

    func testDecodesFromDataSlices() throws {
        let whole = Data(hex: "ff83010203")
        XCTAssertEqual(try CBOR.decode(whole.dropFirst()), .array([.unsigned(1), .unsigned(2), .unsigned(3)]))
    }

    func testSubscriptsAndAccessors() throws {
        let map = try CBOR.decode(Data(hex: "a30102266161626162" + "5820" + String(repeating: "00", count: 32)))
        XCTAssertEqual(map[1], .unsigned(2))
        XCTAssertEqual(map[-7]?.textValue, "a")
        XCTAssertEqual(map["ab"]?.bytesValue?.count, 32)
        XCTAssertNil(map[2])
        XCTAssertNil(map["zz"])
        XCTAssertNil(CBOR.array([])[1])
    }

    func testMapEqualityIsOrderSensitiveAndNaNEqualsItself() {
        let ab: CBOR = .map([(key: .unsigned(1), value: .null), (key: .unsigned(2), value: .null)])
        let ba: CBOR = .map([(key: .unsigned(2), value: .null), (key: .unsigned(1), value: .null)])
        XCTAssertNotEqual(ab, ba)
        XCTAssertEqual(CBOR.float(.nan), CBOR.float(.nan))
        XCTAssertNotEqual(CBOR.float(0.0), CBOR.float(-0.0))
        XCTAssertNotEqual(CBOR.unsigned(0), CBOR.negative(0))
    }

    // MARK: Strictness

    func testRejectsTrailingBytes() {
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: "0000")))
    }

    func testRejectsEmptyAndTruncatedInput() {
        for hex in [
            "", "18", "1900", "1a000000", "1b00000000000000", "4301", "6261", "8201", "a101", "a1", "f9", "fa0000",
            "fb00",
        ] {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
    }

    func testRejectsIndefiniteLengths() {
        // Appendix A's indefinite-length examples, and a lone break.
        for hex in [
            "5f42010243030405ff", "7f657374726561646d696e67ff", "9fff", "9f018202039f0405ffff",
            "bf61610161629f0203ffff", "ff",
        ] {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
    }

    func testRejectsReservedAdditionalInformation() {
        for hex in ["1c", "1d", "1e", "3c", "5c", "7c", "9c", "bc", "fc", "fd", "fe"] {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
    }

    func testRejectsTagsWithClearMessage() {
        // Appendix A: 0("2013-03-21T20:04:00Z"), 1(1363896240), 2(h'010000000000000000')
        for hex in ["c074323031332d30332d32315432303a30343a30305a", "c11a514b67b0", "c249010000000000000000"] {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
        XCTAssertThrowsError(try CBOR.decode(Data(hex: "c11a514b67b0"))) { error in
            XCTAssertTrue((error as? WebAuthnError)?.message.contains("tags") == true)
        }
    }

    func testRejectsUnassignedSimpleValues() {
        for hex in ["f0", "f8ff", "f818", "e0"] {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
    }

    /// A header claiming 2^62 bytes must be refused before anything is allocated; if the decoder
    /// tried to allocate or read, this would crash or hang instead of failing fast.
    func testRejectsHugeDeclaredLengthsWithoutAllocating() {
        let huge = [
            "5b4000000000000000", "7b4000000000000000", "9b4000000000000000", "bb4000000000000000",
            "5bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff", "5a7fffffff00",
        ]
        for hex in huge {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
        // A count that fits the input in bytes but not as items: a map needs two bytes per entry.
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: "a20102")))
    }

    func testNestingLimit() throws {
        func nested(_ depth: Int) -> Data { Data(repeating: 0x81, count: depth - 1) + Data([0x80]) }
        XCTAssertNoThrow(try CBOR.decode(nested(16)))
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(nested(17)))
        // Maps count too: 16 arrays around a map is 17 levels.
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(repeating: 0x81, count: 16) + Data([0xA0])))
        // Deep hostile input fails cleanly rather than exhausting the stack.
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(repeating: 0x81, count: 100_000)))
    }

    func testItemCountLimit() throws {
        // An array of 4095 zeros is 4096 items with the array itself.
        func array(of count: Int) -> Data { CBOR.array(Array(repeating: .unsigned(0), count: count)).encoded() }
        XCTAssertNoThrow(try CBOR.decode(array(of: 4095)))
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(array(of: 4096)))
        // Spread over nested containers, still counted.
        let split = CBOR.array([
            .array(Array(repeating: .null, count: 2048)), .array(Array(repeating: .null, count: 2048)),
        ])
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(split.encoded()))
    }

    func testRejectsInvalidUTF8() {
        // Lone continuation byte, truncated sequence, overlong "/", UTF-16 surrogate, beyond U+10FFFF.
        for hex in ["6180", "62c328", "62c0af", "63eda080", "64f4908080"] {
            XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: hex)), hex)
        }
        XCTAssertEqual(try CBOR.decode(Data(hex: "63efbfbd")), .text("\u{FFFD}"), "a genuine U+FFFD is valid")
    }

    func testRejectsDuplicateMapKeys() {
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: "a201020103")))
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: "a2616101616102")))
        // Same value, different encoding of the head: still the same key.
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: "a20102180103")))
        // Nested maps are checked too.
        XCTAssertThrowsWebAuthn(.malformedCBOR, try CBOR.decode(Data(hex: "81a226002600")))
        // Same integer value but different major types are different keys.
        XCTAssertNoThrow(try CBOR.decode(Data(hex: "a200012001")))
    }
}
