import Foundation

/// One value's `Decoder` (`BinaryWire.decode`): the value at `offset`, whose end was checked.
struct BinaryWireDecoding: Decoder {
    let reader: BinaryWireReader
    let offset: Int
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(reader: BinaryWireReader, offset: Int, codingPath: [any CodingKey]) {
        self.reader = reader
        self.offset = offset
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let (keys, values) = try reader.items(at: offset, object: true, codingPath)
        return KeyedDecodingContainer(Keyed<Key>(decoding: self, keys: keys, values: values))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        Unkeyed(decoding: self, values: try reader.items(at: offset, object: false, codingPath).values)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(decoding: self) }

    /// The value at `offset` as `type`, through the value at `at` (its end checked) and `path`.
    static func read<T: Decodable>(
        _ type: T.Type,
        reader: BinaryWireReader,
        at offset: Int,
        path: [any CodingKey]
    ) throws -> T {
        try BinaryWireDecoding(reader: reader, offset: offset, codingPath: path).unbox(type)
    }

    /// The value as `type`: the wire's own kinds read directly (the common ones found by their
    /// type's identity, before any conformance is looked up), anything else by its `init(from:)`.
    func unbox<T: Decodable>(_ type: T.Type) throws -> T {
        if type == String.self { return try string() as! T }
        if type == Int.self { return try integer(Int.self) as! T }
        if type == Bool.self { return try bool() as! T }
        if type == Data.self { return try bytes() as! T }
        if type == UInt64.self { return try integer(UInt64.self) as! T }
        if type == Double.self { return try double() as! T }
        if type == Date.self { return Date(timeIntervalSince1970: try double()) as! T }
        if let integer = type as? any FixedWidthInteger.Type {
            guard let typed = try self.integer(integer) as? T else { throw mismatch(type) }
            return typed
        }
        if let floating = type as? any BinaryFloatingPoint.Type {
            guard let typed = floating.init(try double()) as? T else { throw mismatch(type) }
            return typed
        }
        return try T(from: self)
    }

    func mismatch(_ type: Any.Type) -> DecodingError {
        let tag = reader.bytes[offset]
        return .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found a value tagged \(tag)"))
    }

    func string() throws -> String {
        guard try reader.tag(at: offset, codingPath) == .string else { throw mismatch(String.self) }
        return try reader.text(reader.payload(at: offset), codingPath)
    }

    func bool() throws -> Bool {
        switch try reader.tag(at: offset, codingPath) {
        case .true: return true
        case .false: return false
        default: throw mismatch(Bool.self)
        }
    }

    func bytes() throws -> Data {
        guard try reader.tag(at: offset, codingPath) == .bytes else { throw mismatch(Data.self) }
        return Data(reader.bytes[reader.payload(at: offset)])
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        let value: I?
        switch try reader.tag(at: offset, codingPath) {
        case .int: value = reader.integer(at: offset).signed.flatMap { I(exactly: $0) }
        case .uint: value = reader.integer(at: offset).unsigned.flatMap { I(exactly: $0) }
        default: value = nil
        }
        guard let value else { throw mismatch(type) }
        return value
    }

    /// A finite number: JSON cannot carry NaN or an infinity, and neither does this coding.
    func double() throws -> Double {
        let value: Double
        switch try reader.tag(at: offset, codingPath) {
        case .double: value = reader.double(at: offset)
        case .int: value = Double(reader.integer(at: offset).signed ?? 0)
        case .uint: value = Double(reader.integer(at: offset).unsigned ?? 0)
        default: throw mismatch(Double.self)
        }
        guard value.isFinite else { throw reader.corrupted("a number that is not finite", codingPath) }
        return value
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoding: BinaryWireDecoding
        let keys: [Range<Int>]
        let values: [Int]
        var codingPath: [any CodingKey] { decoding.codingPath }

        var allKeys: [Key] {
            keys.compactMap { (try? decoding.reader.text($0, codingPath)).flatMap(Key.init(stringValue:)) }
        }

        private func index(_ key: Key) -> Int? { index(named: key.stringValue) }

        private func index(named key: String) -> Int? {
            var name = key
            return name.withUTF8 { name in
                decoding.reader.bytes.withUnsafeBufferPointer { bytes in
                    keys.firstIndex { range in
                        range.count == name.count
                            && (name.isEmpty
                                || memcmp(bytes.baseAddress! + range.lowerBound, name.baseAddress!, name.count) == 0)
                    }
                }
            }
        }

        private func offset(_ key: Key) throws -> Int {
            guard let i = index(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no such key"))
            }
            return values[i]
        }

        private func value(_ key: Key) throws -> BinaryWireDecoding {
            BinaryWireDecoding(reader: decoding.reader, offset: try offset(key), codingPath: codingPath + [key])
        }

        /// The value under `key`, or nil when it is absent or null: one look for the key.
        private func present(_ key: Key) throws -> BinaryWireDecoding? {
            guard let i = index(key), decoding.reader.bytes[values[i]] != BinaryWire.Tag.null.rawValue else {
                return nil
            }
            return BinaryWireDecoding(reader: decoding.reader, offset: values[i], codingPath: codingPath + [key])
        }

        func contains(_ key: Key) -> Bool { index(key) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            try decoding.reader.tag(at: try offset(key), codingPath) == .null
        }

        func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(key).string() }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(key).bool() }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(key).integer(type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(key).integer(type) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(key).integer(type) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(key).integer(type) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(key).double() }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(key).unbox(type) }

        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key)?.string() }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key)?.bool() }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key)?.double() }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            try present(key)?.unbox(type)
        }

        func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type,
            forKey key: Key
        ) throws -> KeyedDecodingContainer<NestedKey> {
            try BinaryWireDecoding(reader: decoding.reader, offset: try offset(key), codingPath: codingPath + [key])
                .container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try BinaryWireDecoding(reader: decoding.reader, offset: try offset(key), codingPath: codingPath + [key])
                .unkeyedContainer()
        }

        /// The value under "super", whatever keys `Key` has (as JSONDecoder's).
        func superDecoder() throws -> any Decoder {
            guard let i = index(named: "super") else {
                throw DecodingError.valueNotFound(
                    Any.self,
                    .init(codingPath: codingPath, debugDescription: "no value under \"super\"")
                )
            }
            return BinaryWireDecoding(
                reader: decoding.reader,
                offset: values[i],
                codingPath: codingPath + [BinaryWirePathKey(stringValue: "super")]
            )
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            BinaryWireDecoding(reader: decoding.reader, offset: try offset(key), codingPath: codingPath + [key])
        }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let decoding: BinaryWireDecoding
        let values: [Int]
        var currentIndex = 0
        var codingPath: [any CodingKey] { decoding.codingPath }
        var count: Int? { values.count }
        var isAtEnd: Bool { currentIndex >= values.count }

        init(decoding: BinaryWireDecoding, values: [Int]) {
            self.decoding = decoding
            self.values = values
        }

        private var path: [any CodingKey] { codingPath + [BinaryWirePathKey(currentIndex)] }

        private func next() throws -> Int {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any.self, .init(codingPath: path, debugDescription: "no more items"))
            }
            return values[currentIndex]
        }

        mutating func decodeNil() throws -> Bool {
            guard try decoding.reader.tag(at: try next(), path) == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let value = try BinaryWireDecoding.read(type, reader: decoding.reader, at: try next(), path: path)
            currentIndex += 1
            return value
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type
        ) throws -> KeyedDecodingContainer<NestedKey> {
            let nested = try BinaryWireDecoding(reader: decoding.reader, offset: try next(), codingPath: path)
                .container(keyedBy: type)
            currentIndex += 1
            return nested
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let nested = try BinaryWireDecoding(reader: decoding.reader, offset: try next(), codingPath: path)
                .unkeyedContainer()
            currentIndex += 1
            return nested
        }

        mutating func superDecoder() throws -> any Decoder {
            let decoder = BinaryWireDecoding(reader: decoding.reader, offset: try next(), codingPath: path)
            currentIndex += 1
            return decoder
        }
    }

    struct Single: SingleValueDecodingContainer {
        let decoding: BinaryWireDecoding
        var codingPath: [any CodingKey] { decoding.codingPath }

        func decodeNil() -> Bool { (try? decoding.reader.tag(at: decoding.offset, codingPath)) == .null }

        func decode(_ type: String.Type) throws -> String { try decoding.string() }
        func decode(_ type: Bool.Type) throws -> Bool { try decoding.bool() }
        func decode(_ type: Int.Type) throws -> Int { try decoding.integer(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decoding.integer(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decoding.integer(type) }
        func decode(_ type: Double.Type) throws -> Double { try decoding.double() }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoding.unbox(type) }
    }
}
