import Foundation

/// One value's `Decoder` (`BinaryWire.decode`): the value at `offset`, whose end was checked.
/// Its coding path is its container's and its own key or index there (`step`), joined only when
/// someone asks (an error, a container opened in it), not for every value read.
struct BinaryWireDecoding: Decoder {
    enum Step {
        case key(any CodingKey)
        case index(Int)
    }

    let reader: BinaryWireReader
    let offset: Int
    let parentPath: [any CodingKey]
    let step: Step?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    var codingPath: [any CodingKey] {
        switch step {
        case nil: return parentPath
        case .key(let key): return parentPath + [key]
        case .index(let i): return parentPath + [BinaryWirePathKey(i)]
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let (keys, values) = try reader.items(at: offset, object: true, codingPath)
        return KeyedDecodingContainer(Keyed<Key>(reader: reader, codingPath: codingPath, keys: keys, values: values))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let values = try reader.items(at: offset, object: false, codingPath).values
        return Unkeyed(reader: reader, codingPath: codingPath, values: values)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(decoding: self) }

    /// The value as `type`: the wire's own kinds read directly, found by their type's identity (no
    /// conformance is looked up on the way), anything else by its `init(from:)`. Every number type
    /// of the standard library is listed, so none of them reaches its own `init(from:)`, which
    /// would come back here.
    func unbox<T: Decodable>(_ type: T.Type) throws -> T {
        if type == String.self { return try string() as! T }
        if type == Int.self { return try integer(Int.self) as! T }
        if type == Bool.self { return try bool() as! T }
        if type == Data.self { return try bytes() as! T }
        if type == UInt64.self { return try integer(UInt64.self) as! T }
        if type == Double.self { return try double() as! T }
        if type == Date.self { return Date(timeIntervalSince1970: try double()) as! T }
        if type == UInt32.self { return try integer(UInt32.self) as! T }
        if type == UInt8.self { return try integer(UInt8.self) as! T }
        if type == Int64.self { return try integer(Int64.self) as! T }
        if type == Int32.self { return try integer(Int32.self) as! T }
        if type == Int16.self { return try integer(Int16.self) as! T }
        if type == Int8.self { return try integer(Int8.self) as! T }
        if type == UInt16.self { return try integer(UInt16.self) as! T }
        if type == UInt.self { return try integer(UInt.self) as! T }
        if type == Int128.self { return try integer(Int128.self) as! T }
        if type == UInt128.self { return try integer(UInt128.self) as! T }
        if type == Float.self { return try floating(Float.self) as! T }
        if type == Float16.self { return try floating(Float16.self) as! T }
        if type == KeychainValue.self { return try keychainValue() as! T }
        if type == [String: KeychainValue].self { return try keychainAttributes() as! T }
        return try T(from: self)
    }

    /// A keychain request's or item's attributes, read from the object directly: `Dictionary`'s
    /// own `init(from:)` makes a key for every name (`allKeys`) and then looks each up again.
    /// A name given twice (as Swift compares names) is refused, which no encoder writes: through
    /// the keyed container, the first value of a name repeated byte for byte was read and every
    /// later one left unread, and a name repeated in another form of the same text replaced it.
    private func keychainAttributes() throws -> [String: KeychainValue] {
        let (keys, values) = try reader.items(at: offset, object: true, codingPath)
        var attributes: [String: KeychainValue] = [:]
        attributes.reserveCapacity(keys.count)
        for (key, value) in zip(keys, values) {
            let name = try reader.text(key, codingPath)
            let step = Step.key(BinaryWirePathKey(stringValue: name))
            let read = BinaryWireDecoding(reader: reader, offset: value, parentPath: codingPath, step: step)
            guard attributes.updateValue(try read.keychainValue(), forKey: name) == nil else {
                throw reader.corrupted("the attribute \"\(name.prefix(64))\" given twice", codingPath)
            }
        }
        return attributes
    }

    /// A keychain attribute's value, as `BinaryWireBox` writes it: its kind is the value's tag.
    private func keychainValue() throws -> KeychainValue {
        switch try reader.tag(at: offset, codingPath) {
        case .string: return .string(try string())
        case .bytes: return .data(try bytes())
        case .int, .uint: return .int(try integer(Int64.self))
        case .true, .false: return .bool(try bool())
        case .double: return .date(Date(timeIntervalSince1970: try double()))
        case .null, .array, .object: throw mismatch(KeychainValue.self)
        }
    }

    /// A `double` as a narrower floating-point type, as `Float(_: Double)` rounds it; one out of
    /// its range is a type mismatch, not an infinity.
    private func floating<F: BinaryFloatingPoint>(_ type: F.Type) throws -> F {
        let value = F(try double())
        guard value.isFinite else { throw mismatch(type) }
        return value
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
        let reader: BinaryWireReader
        let codingPath: [any CodingKey]
        let keys: [Range<Int>]
        let values: [Int]

        var allKeys: [Key] {
            keys.compactMap { (try? reader.text($0, codingPath)).flatMap(Key.init(stringValue:)) }
        }

        private func index(_ key: Key) -> Int? { index(named: key.stringValue) }

        private func index(named key: String) -> Int? {
            var name = key
            return name.withUTF8 { name in
                reader.bytes.withUnsafeBufferPointer { bytes in
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
            BinaryWireDecoding(reader: reader, offset: try offset(key), parentPath: codingPath, step: .key(key))
        }

        /// The value under `key`, or nil when it is absent or null: one look for the key.
        private func present(_ key: Key) throws -> BinaryWireDecoding? {
            guard let i = index(key), reader.bytes[values[i]] != BinaryWire.Tag.null.rawValue else {
                return nil
            }
            return BinaryWireDecoding(reader: reader, offset: values[i], parentPath: codingPath, step: .key(key))
        }

        func contains(_ key: Key) -> Bool { index(key) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            try reader.tag(at: try offset(key), codingPath) == .null
        }

        func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(key).string() }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(key).bool() }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(key).integer(type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(key).integer(type) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(key).integer(type) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(key).integer(type) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(key).double() }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(key).unbox(type) }
        // The protocol's own versions of these (and of their `IfPresent`) throw "not implemented".
        func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { try value(key).integer(type) }
        func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { try value(key).integer(type) }
        func decodeIfPresent(_ type: Int128.Type, forKey key: Key) throws -> Int128? {
            try present(key)?.integer(type)
        }
        func decodeIfPresent(_ type: UInt128.Type, forKey key: Key) throws -> UInt128? {
            try present(key)?.integer(type)
        }

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
            try value(key).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try value(key).unkeyedContainer()
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
                reader: reader,
                offset: values[i],
                parentPath: codingPath,
                step: .key(BinaryWirePathKey(stringValue: "super"))
            )
        }

        func superDecoder(forKey key: Key) throws -> any Decoder { try value(key) }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let reader: BinaryWireReader
        let codingPath: [any CodingKey]
        let values: [Int]
        var currentIndex = 0
        var count: Int? { values.count }
        var isAtEnd: Bool { currentIndex >= values.count }

        init(reader: BinaryWireReader, codingPath: [any CodingKey], values: [Int]) {
            self.reader = reader
            self.codingPath = codingPath
            self.values = values
        }

        /// The next item's decoder, or `valueNotFound` past the last.
        private func next() throws -> BinaryWireDecoding {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(
                    Any.self,
                    .init(codingPath: codingPath + [BinaryWirePathKey(currentIndex)], debugDescription: "no more items")
                )
            }
            return BinaryWireDecoding(
                reader: reader,
                offset: values[currentIndex],
                parentPath: codingPath,
                step: .index(currentIndex)
            )
        }

        mutating func decodeNil() throws -> Bool {
            let item = try next()
            guard try reader.tag(at: item.offset, item.codingPath) == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let value = try next().unbox(type)
            currentIndex += 1
            return value
        }
        mutating func decode(_ type: Int128.Type) throws -> Int128 { try nextInteger(type) }
        mutating func decode(_ type: UInt128.Type) throws -> UInt128 { try nextInteger(type) }

        private mutating func nextInteger<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
            let value = try next().integer(type)
            currentIndex += 1
            return value
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type
        ) throws -> KeyedDecodingContainer<NestedKey> {
            let nested = try next().container(keyedBy: type)
            currentIndex += 1
            return nested
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let nested = try next().unkeyedContainer()
            currentIndex += 1
            return nested
        }

        mutating func superDecoder() throws -> any Decoder {
            let decoder = try next()
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
        func decode(_ type: Int128.Type) throws -> Int128 { try decoding.integer(type) }
        func decode(_ type: UInt128.Type) throws -> UInt128 { try decoding.integer(type) }
    }
}
