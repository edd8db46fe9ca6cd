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

    func unbox<T: Decodable>(_ type: T.Type) throws -> T {
        let tag = try reader.tag(at: offset, codingPath)
        func mismatch() -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found a value tagged \(tag)"))
        }
        if type == String.self {
            guard tag == .string else { throw mismatch() }
            return try reader.text(reader.payload(at: offset), codingPath) as! T
        }
        if type == Bool.self {
            guard tag == .true || tag == .false else { throw mismatch() }
            return (tag == .true) as! T
        }
        if type == Data.self {
            guard tag == .bytes else { throw mismatch() }
            return Data(reader.bytes[reader.payload(at: offset)]) as! T
        }
        if type == Date.self { return Date(timeIntervalSince1970: try double(tag, mismatch)) as! T }
        if let integer = type as? any FixedWidthInteger.Type {
            guard let value = try self.integer(integer, tag), let typed = value as? T else { throw mismatch() }
            return typed
        }
        if let floating = type as? any BinaryFloatingPoint.Type {
            guard let typed = floating.init(try double(tag, mismatch)) as? T else { throw mismatch() }
            return typed
        }
        return try T(from: self)
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ tag: BinaryWire.Tag) throws -> I? {
        switch tag {
        case .int: return I(exactly: Int64(bitPattern: reader.uint64(at: offset + 1)))
        case .uint: return I(exactly: reader.uint64(at: offset + 1))
        default: return nil
        }
    }

    private func double(_ tag: BinaryWire.Tag, _ mismatch: () -> DecodingError) throws -> Double {
        switch tag {
        case .double: return Double(bitPattern: reader.uint64(at: offset + 1))
        case .int: return Double(Int64(bitPattern: reader.uint64(at: offset + 1)))
        case .uint: return Double(reader.uint64(at: offset + 1))
        default: throw mismatch()
        }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoding: BinaryWireDecoding
        let keys: [Range<Int>]
        let values: [Int]
        var codingPath: [any CodingKey] { decoding.codingPath }

        var allKeys: [Key] {
            keys.compactMap { (try? decoding.reader.text($0, codingPath)).flatMap(Key.init(stringValue:)) }
        }

        private func index(_ key: Key) -> Int? {
            let name = key.stringValue.utf8
            let bytes = decoding.reader.bytes
            return keys.firstIndex { $0.count == name.count && bytes[$0].elementsEqual(name) }
        }

        private func offset(_ key: Key) throws -> Int {
            guard let i = index(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no such key"))
            }
            return values[i]
        }

        func contains(_ key: Key) -> Bool { index(key) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            try decoding.reader.tag(at: try offset(key), codingPath) == .null
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try BinaryWireDecoding.read(type, reader: decoding.reader, at: try offset(key), path: codingPath + [key])
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

        func superDecoder() throws -> any Decoder { try superDecoder(forKey: Key(stringValue: "super")!) }

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

        private var path: [any CodingKey] { codingPath + [BinaryWireIndexKey(currentIndex)] }

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

        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoding.unbox(type) }
    }
}
