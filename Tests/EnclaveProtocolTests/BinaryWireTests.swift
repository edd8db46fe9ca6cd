import EnclaveProtocol
import Foundation
import XCTest

/// The binary coding of the wire: every request and reply comes back as it went, and no input —
/// cut short, lying about its lengths, flipped at random — does more than throw.
final class BinaryWireTests: XCTestCase {
    func testEveryRequestRoundTrips() throws {
        for (i, request) in RequestTests.everyRequest.enumerated() {
            let envelope = RequestEnvelope(id: UInt64(i + 1), request: request)
            XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded(.binary), .binary), envelope, "\(request)")
        }
    }

    func testEveryReplyRoundTrips() throws {
        for (i, reply) in ReplyTests.everyReply.enumerated() {
            let envelope = ReplyEnvelope(id: UInt64(i + 1), reply: reply)
            XCTAssertEqual(try ReplyEnvelope.decode(envelope.encoded(.binary), .binary), envelope, "\(reply)")
        }
    }

    private struct Numbers: Codable, Equatable {
        var small: Int8
        var wide: UInt32
        var lowest: Int64
        var highest: UInt64
        var ratio: Float
        var when: Date
        var blob: Data
        var nothing: String?
        var list: [Int16]
        var byNumber: [Int: String]
    }

    func testIntegersDatesAndBytesKeepTheirValues() throws {
        let numbers = Numbers(
            small: -128,
            wide: .max,
            lowest: .min,
            highest: .max,
            ratio: 0.25,
            when: Date(timeIntervalSince1970: 1_800_000_000.5),
            blob: Data([0, 255, 7]),
            nothing: nil,
            list: [-1, 0, 1],
            byNumber: [3: "three", -4: "minus four"]
        )
        XCTAssertEqual(try BinaryWire.decode(Numbers.self, from: BinaryWire.encode(numbers)), numbers)
    }

    private struct EveryNumber: Codable, Equatable {
        var int: Int
        var int8: Int8
        var int16: Int16
        var int32: Int32
        var int64: Int64
        var int128: Int128
        var uint: UInt
        var uint8: UInt8
        var uint16: UInt16
        var uint32: UInt32
        var uint64: UInt64
        var uint128: UInt128
        var float16: Float16
        var float: Float
        var double: Double
        var listed: [UInt16]
        var wide: [Int128]
    }

    /// Every number type of the standard library is read and written as a number, under a key,
    /// in an array and alone (each is found by its type's identity; one left out would come back
    /// to the coding through its own `Codable` and never end).
    func testEveryNumberTypeOfTheStandardLibraryKeepsItsValue() throws {
        let numbers = EveryNumber(
            int: .min,
            int8: .min,
            int16: .min,
            int32: .min,
            int64: .min,
            int128: Int128(Int64.min),
            uint: .max,
            uint8: .max,
            uint16: .max,
            uint32: .max,
            uint64: .max,
            uint128: UInt128(UInt64.max),
            float16: 0.5,
            float: -1.25,
            double: 1e300,
            listed: [0, 1, .max],
            wide: [-1, 1]
        )
        XCTAssertEqual(try BinaryWire.decode(EveryNumber.self, from: BinaryWire.encode(numbers)), numbers)
        XCTAssertEqual(try BinaryWire.decode(UInt16.self, from: BinaryWire.encode(UInt16(513))), 513)
        XCTAssertEqual(try BinaryWire.decode(Int128.self, from: BinaryWire.encode(Int128(-5))), -5)
        XCTAssertEqual(try BinaryWire.decode(Float.self, from: BinaryWire.encode(Float(2.5))), 2.5)
        // A 128-bit number travels only when it fits 64 bits; a double is no Float past its range.
        XCTAssertThrowsError(try BinaryWire.encode(UInt128(UInt64.max) + 1)) {
            guard case EncodingError.invalidValue = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try BinaryWire.decode(Float.self, from: BinaryWire.encode(1e300))) {
            guard case DecodingError.typeMismatch = $0 else { return XCTFail("\($0)") }
        }
    }

    /// A keychain value travels as the one value it holds, its kind told by its tag (a date is the
    /// one `double`), where JSON wraps it (`{"string": {"_0": …}}`, as stored attributes keep it).
    func testAKeychainValueIsItsTaggedValue() throws {
        XCTAssertEqual(try BinaryWire.encode(KeychainValue.string("a")), [6, 1, 0x61])
        XCTAssertEqual(try BinaryWire.encode(KeychainValue.data(Data([9]))), [7, 1, 9])
        XCTAssertEqual(try BinaryWire.encode(KeychainValue.bool(true)), [2])
        XCTAssertEqual(try BinaryWire.encode(KeychainValue.int(-1)), [3, 1])
        let values: [String: KeychainValue] = [
            "svce": .string("s"), "v_Data": .data(Data([0, 255])), "sync": .bool(false), "type": .int(.min),
            "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000.25)),
        ]
        XCTAssertEqual(try BinaryWire.decode([String: KeychainValue].self, from: BinaryWire.encode(values)), values)
        for notAValue in [try BinaryWire.encode(UInt64.max), [0], try BinaryWire.encode(["a": 1])] {
            XCTAssertThrowsError(try BinaryWire.decode(KeychainValue.self, from: notAValue)) {
                guard case DecodingError.typeMismatch = $0 else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(
            String(decoding: try JSONEncoder().encode(KeychainValue.string("a")), as: UTF8.self),
            #"{"string":{"_0":"a"}}"#
        )
    }

    /// Attributes are read and written directly (no keyed container, no key made per name), in
    /// the bytes `Dictionary`'s own coding writes through the keyed containers, read to the same
    /// values with the same errors; a name given twice, which no encoder writes, is refused.
    func testKeychainAttributesTravelAsDictionarysOwnCoding() throws {
        /// Reaches `Dictionary`'s generic coding: not a type the coder knows.
        struct Opaque: Codable, Equatable {
            var value: KeychainValue
            init(_ value: KeychainValue) { self.value = value }
            init(from decoder: any Decoder) throws {
                value = try decoder.singleValueContainer().decode(KeychainValue.self)
            }
            func encode(to encoder: any Encoder) throws {
                var single = encoder.singleValueContainer()
                try single.encode(value)
            }
        }
        let many: [String: KeychainValue] = [
            "svce": .string("s"), "v_Data": .data(Data([0, 255])), "sync": .bool(false), "type": .int(.min),
            "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000.25)), "": .string(""),
        ]
        // `mapValues` keeps the order, so the generic coding writes the names in the same order.
        XCTAssertEqual(try BinaryWire.encode(many), try BinaryWire.encode(many.mapValues(Opaque.init)))
        let bytes = try BinaryWire.encode(many.mapValues(Opaque.init))
        XCTAssertEqual(try BinaryWire.decode([String: KeychainValue].self, from: bytes), many)
        XCTAssertEqual(
            try BinaryWire.decode([String: KeychainValue].self, from: BinaryWire.encode([String: KeychainValue]())),
            [:]
        )

        // {"a": "x", "a": "y"} and {"K": "x", "\u{212A}": "y"} (the Kelvin sign, the same text).
        for repeated: [UInt8] in [
            [9, 11, 2, 1, 0x61, 6, 1, 0x78, 1, 0x61, 6, 1, 0x79],
            [9, 13, 2, 1, 0x4B, 6, 1, 0x78, 3, 0xE2, 0x84, 0xAA, 6, 1, 0x79],
        ] {
            XCTAssertThrowsError(try BinaryWire.decode([String: KeychainValue].self, from: repeated)) {
                guard case DecodingError.dataCorrupted(let context) = $0 else { return XCTFail("\($0)") }
                XCTAssert(context.debugDescription.contains("given twice"), context.debugDescription)
            }
        }

        struct Held: Codable { var attributes: [String: KeychainValue] }
        let notAValue = try BinaryWire.encode(["attributes": ["acct": [1]]])
        XCTAssertThrowsError(try BinaryWire.decode(Held.self, from: notAValue)) {
            guard case DecodingError.typeMismatch(_, let context) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["attributes", "acct"])
        }
        XCTAssertThrowsError(try BinaryWire.decode(Held.self, from: BinaryWire.encode(["attributes": [1]]))) {
            guard case DecodingError.typeMismatch(_, let context) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["attributes"])
        }
    }

    /// An error names where it happened, key by key and index by index, though the path is made
    /// only then: in decoding and in encoding.
    func testErrorsNameTheWholePath() throws {
        struct Inner: Codable { var list: [Int] }
        struct Outer: Codable { var inner: Inner }
        struct NarrowInner: Codable { var list: [Int8] }
        struct NarrowOuter: Codable { var inner: NarrowInner }
        let bytes = try BinaryWire.encode(Outer(inner: Inner(list: [1, 2, 300])))
        XCTAssertThrowsError(try BinaryWire.decode(NarrowOuter.self, from: bytes)) {
            guard case DecodingError.typeMismatch(_, let context) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["inner", "list", "2"])
        }
        struct Missing: Codable { var inner: [String: Int] }
        XCTAssertThrowsError(try BinaryWire.decode(Missing.self, from: BinaryWire.encode(["other": 1]))) {
            guard case DecodingError.keyNotFound(let key, let context) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(key.stringValue, "inner")
            XCTAssertEqual(context.codingPath.map(\.stringValue), [])
        }
        struct Wide: Codable { var values: [UInt128] }
        struct Holder: Codable { var wide: Wide }
        XCTAssertThrowsError(try BinaryWire.encode(Holder(wide: Wide(values: [1, .max])))) {
            guard case EncodingError.invalidValue(_, let context) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["wide", "values", "1"])
        }
    }

    func testANumberThatDoesNotFitItsTypeIsATypeMismatch() throws {
        struct Narrow: Codable { var v: UInt8 }
        struct Wide: Codable { var v: Int }
        XCTAssertThrowsError(try BinaryWire.decode(Narrow.self, from: BinaryWire.encode(Wide(v: 256)))) {
            guard case DecodingError.typeMismatch = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try BinaryWire.decode(Narrow.self, from: BinaryWire.encode(Wide(v: -1))))
        XCTAssertEqual(try BinaryWire.decode(Narrow.self, from: BinaryWire.encode(Wide(v: 255))).v, 255)
    }

    private var canEvaluate: [UInt8] {
        RequestEnvelope(id: 7, request: .canEvaluate(.init(context: "c", policy: 1))).encoded(.binary)
    }

    /// Every prefix of a message is malformed: it never reads past its bytes.
    func testEveryCutIsMalformed() {
        let bytes = canEvaluate
        for cut in 0..<bytes.count {
            XCTAssertThrowsError(try RequestEnvelope.decode(Array(bytes.prefix(cut)), .binary), "cut at \(cut)") {
                XCTAssertEqual(($0 as? WireError)?.code, .malformed)
            }
        }
        XCTAssertThrowsError(try RequestEnvelope.decode(bytes + [0], .binary), "a byte after the message")
    }

    /// Attack: lengths and counts that lie. A length past the end, or a count of 2³² − 1 items in a
    /// few bytes, is refused before anything is read or reserved for it; so is a number whose
    /// varint runs past 64 bits.
    func testLengthsAndCountsThatLieAreRefused() {
        var bytes = canEvaluate
        XCTAssertEqual(bytes[0], 9, "an object")
        XCTAssertEqual(Int(bytes[1]), bytes.count - 2, "its length, one varint byte")
        bytes[1] += 1
        XCTAssertThrowsError(try RequestEnvelope.decode(bytes, .binary), "the object's length runs past the end")
        bytes = canEvaluate
        XCTAssertEqual(bytes[2], 3, "id, op, args")
        bytes[2] = 0x7F
        XCTAssertThrowsError(try RequestEnvelope.decode(bytes, .binary), "127 items in a few bytes")
        XCTAssertThrowsError(try BinaryWire.decode([String].self, from: [8, 5, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]))
        XCTAssertThrowsError(try BinaryWire.decode(String.self, from: [6, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x41]))
        XCTAssertEqual(try BinaryWire.decode(UInt64.self, from: [4] + [UInt8](repeating: 0xFF, count: 9) + [1]), .max)
        XCTAssertThrowsError(try BinaryWire.decode(UInt64.self, from: [4] + [UInt8](repeating: 0xFF, count: 9) + [2]))
        XCTAssertThrowsError(try BinaryWire.decode(UInt64.self, from: [4] + [UInt8](repeating: 0x80, count: 10) + [0]))
    }

    func testTextThatIsNotUTF8AndTagsThatAreNoTagsAreRefused() {
        XCTAssertEqual(try BinaryWire.decode(String.self, from: [6, 2, 0x68, 0x69]), "hi")
        XCTAssertThrowsError(try BinaryWire.decode(String.self, from: [6, 2, 0xC3, 0x28]))
        XCTAssertThrowsError(try BinaryWire.decode(String.self, from: [10]))
        XCTAssertThrowsError(try BinaryWire.decode(Bool.self, from: [6, 0]), "a string is not a Bool")
    }

    /// No message is larger than its JSON: the frame limit (64 KiB) holds as much either way.
    func testNoMessageIsLargerThanItsJSON() {
        for (i, request) in RequestTests.everyRequest.enumerated() {
            let envelope = RequestEnvelope(id: UInt64(1000 + i), request: request)
            XCTAssertLessThanOrEqual(envelope.encoded(.binary).count, envelope.encoded(.json).count, "\(request)")
        }
        for (i, reply) in ReplyTests.everyReply.enumerated() {
            let envelope = ReplyEnvelope(id: UInt64(1000 + i), reply: reply)
            XCTAssertLessThanOrEqual(envelope.encoded(.binary).count, envelope.encoded(.json).count, "\(reply)")
        }
    }

    /// What JSON cannot carry this coding refuses too: a number that is not finite (a NaN date or
    /// reuse duration), and a key that is not UTF-8 (a dictionary would drop it quietly).
    func testNonFiniteNumbersAndKeysThatAreNotUTF8AreRefused() throws {
        XCTAssertThrowsError(try BinaryWire.decode(Double.self, from: BinaryWire.encode(Double.nan)))
        XCTAssertThrowsError(try BinaryWire.decode(Date.self, from: BinaryWire.encode(Double.infinity)))
        XCTAssertEqual(try BinaryWire.decode(Double.self, from: BinaryWire.encode(-0.5)), -0.5)
        var bytes = try BinaryWire.encode(["é": 1])
        XCTAssertEqual(try BinaryWire.decode([String: Int].self, from: bytes), ["é": 1])
        let key = try XCTUnwrap(bytes.firstIndex(of: 0xC3))
        bytes[key + 1] = 0x28
        XCTAssertThrowsError(try BinaryWire.decode([String: Int].self, from: bytes))
    }

    /// A type that codes its superclass's part under "super" round-trips, whatever its keys.
    func testSuperEncoderAndDecoderNeedNoKeyOfTheirOwn() throws {
        struct Layered: Codable, Equatable {
            var base: Int
            var own: String
            private enum Keys: CodingKey { case own }
            init(base: Int, own: String) {
                self.base = base
                self.own = own
            }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: Keys.self)
                own = try c.decode(String.self, forKey: .own)
                base = try c.superDecoder().singleValueContainer().decode(Int.self)
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Keys.self)
                try c.encode(own, forKey: .own)
                var base = c.superEncoder().singleValueContainer()
                try base.encode(self.base)
            }
        }
        let value = Layered(base: 7, own: "x")
        XCTAssertEqual(try BinaryWire.decode(Layered.self, from: BinaryWire.encode(value)), value)
    }

    /// What the daemon answers depends on how far a request could be read, as with JSON.
    func testAnUnknownOperationAndBadArgumentsKeepTheRequestsID() throws {
        struct Raw: Codable {
            var id: UInt64
            var op: String
            var args: [String: String]
        }
        let unknown = try BinaryWire.encode(Raw(id: 42, op: "launchMissiles", args: [:]))
        XCTAssertThrowsError(try RequestEnvelope.decode(unknown, .binary)) {
            XCTAssertEqual(($0 as? WireError)?.code, .unknownOperation)
            XCTAssertEqual(($0 as? WireError)?.id, 42)
        }
        let wrongType = try BinaryWire.encode(Raw(id: 43, op: "canEvaluate", args: ["context": "c", "policy": "1"]))
        XCTAssertThrowsError(try RequestEnvelope.decode(wrongType, .binary)) {
            XCTAssertEqual(($0 as? WireError)?.code, .invalidArguments)
            XCTAssertEqual(($0 as? WireError)?.id, 43)
        }
    }

    /// Attack: thousands of messages with random bytes changed, decoded by the daemon's reader:
    /// each decodes or throws, none traps.
    func testRandomlyDamagedMessagesOnlyThrow() {
        // Knuth's MMIX LCG from a fixed seed: the same damage on every run.
        var state: UInt64 = 0x5EED
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 17
        }
        let messages = RequestTests.everyRequest.enumerated().map {
            RequestEnvelope(id: UInt64($0.offset), request: $0.element).encoded(.binary)
        }
        var refused = 0
        for round in 0..<4000 {
            var bytes = messages[round % messages.count]
            for _ in 0...Int(next() % 3) {
                bytes[Int(next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: next())
            }
            if (try? RequestEnvelope.decode(bytes, .binary)) == nil { refused += 1 }
        }
        XCTAssertGreaterThan(refused, 1000, "most damage is seen")
    }
}
