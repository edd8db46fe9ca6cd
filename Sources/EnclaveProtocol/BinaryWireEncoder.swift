import Foundation

/// The wire's binary coding: the same `Codable` types as the JSON, written as tagged values
/// (`BinaryWire.Tag`) with lengths instead of text. A client and the daemon agree on it in
/// `hello` (`WireEncoding`); JSON stays for whoever does not ask (the PAM module, raw clients).
///
/// A value is a tag byte and its payload; "varint" is LEB128 (7 bits a byte, low first, at most
/// 10 bytes), so small numbers and lengths take one byte and no message is larger than its JSON:
/// - `null`, `false`, `true`: nothing more;
/// - `int` (Int64, zigzag: 0, −1, 1, −2… as 0, 1, 2, 3…) and `uint` (UInt64): a varint;
/// - `double`: its bits, 8 bytes little-endian;
/// - `string` (UTF-8), `bytes` (`Data`, raw where JSON has base64): a varint length, the bytes;
/// - `array`, `object`: a varint length of what follows it, a varint count, then the items
///   (an object's each a key — varint length and UTF-8 — then its value). The length lets a
///   reader step over a value without reading into it.
/// `Date` travels as a `double` of seconds since 1970, as the JSON replies carry it; a
/// `KeychainValue` as the one value it holds, its kind told by the tag (a date being the `double`).
public enum BinaryWire {
    enum Tag: UInt8 {
        case null = 0
        case `false`, `true`, int, uint, double, string, bytes, array, object
    }

    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let root = try BinaryWireBox.box(value, at: .root)
        var out: [UInt8] = []
        out.reserveCapacity(256)
        root.write(into: &out)
        return out
    }
}

/// A value on its way out: a primitive, or a container that may still be written to.
enum BinaryWireValue {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case bytes(Data)
    case container(BinaryWireContainer)
    /// What an encoder made (`superEncoder`): read when written out.
    case encoder(BinaryWireEncoding)

    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(BinaryWire.Tag.null.rawValue)
        case .bool(let b): out.append(b ? BinaryWire.Tag.true.rawValue : BinaryWire.Tag.false.rawValue)
        case .int(let v):
            out.append(BinaryWire.Tag.int.rawValue)
            Self.appendVarint(UInt64(bitPattern: (v << 1) ^ (v >> 63)), into: &out)
        case .uint(let v):
            out.append(BinaryWire.Tag.uint.rawValue)
            Self.appendVarint(v, into: &out)
        case .double(let v):
            out.append(BinaryWire.Tag.double.rawValue)
            for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: v.bitPattern >> (8 * i))) }
        case .string(let s):
            out.append(BinaryWire.Tag.string.rawValue)
            Self.appendText(s, into: &out)
        case .bytes(let d):
            out.append(BinaryWire.Tag.bytes.rawValue)
            Self.appendVarint(UInt64(d.count), into: &out)
            out.append(contentsOf: d)
        case .container(let c): c.write(into: &out)
        case .encoder(let e): (e.value ?? .null).write(into: &out)
        }
    }

    static func appendVarint(_ v: UInt64, into out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    static func appendText(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            appendVarint(UInt64(utf8.count), into: &out)
            out.append(contentsOf: utf8)
        }
    }
}

/// An array or an object being written (containers are handed out as values, so they share this).
final class BinaryWireContainer {
    let isObject: Bool
    var keys: [String] = []
    var values: [BinaryWireValue] = []

    init(isObject: Bool) { self.isObject = isObject }

    /// The body is written first and its length put before it once known (its varint's own size
    /// moves the body at most once).
    func write(into out: inout [UInt8]) {
        out.append(isObject ? BinaryWire.Tag.object.rawValue : BinaryWire.Tag.array.rawValue)
        let bodyAt = out.count
        BinaryWireValue.appendVarint(UInt64(values.count), into: &out)
        for (i, value) in values.enumerated() {
            if isObject { BinaryWireValue.appendText(keys[i], into: &out) }
            value.write(into: &out)
        }
        let length = out.count - bodyAt
        if length < 0x80 {
            out.insert(UInt8(length), at: bodyAt)
        } else {
            var varint: [UInt8] = []
            BinaryWireValue.appendVarint(UInt64(length), into: &varint)
            out.insert(contentsOf: varint, at: bodyAt)
        }
    }
}

enum BinaryWireBox {
    /// `value` as it travels: numbers, text, `Data` and `Date` directly, found by their type's
    /// identity (no conformance is looked up on the way), anything else by its own `encode(to:)`.
    /// Every number type of the standard library is listed, so none of them reaches its own
    /// `encode(to:)`, which would come back here; the containers' overloads for them come here too.
    static func box<T: Encodable>(_ value: T, at place: BinaryWirePlace) throws -> BinaryWireValue {
        if T.self == String.self { return .string(value as! String) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Data.self { return .bytes(value as! Data) }
        if T.self == Date.self { return .double((value as! Date).timeIntervalSince1970) }
        if T.self == UInt64.self { return .uint(value as! UInt64) }
        if T.self == UInt32.self { return .uint(UInt64(value as! UInt32)) }
        if T.self == UInt8.self { return .uint(UInt64(value as! UInt8)) }
        if T.self == Int64.self { return .int(value as! Int64) }
        if T.self == Int32.self { return .int(Int64(value as! Int32)) }
        if T.self == Int16.self { return .int(Int64(value as! Int16)) }
        if T.self == Int8.self { return .int(Int64(value as! Int8)) }
        if T.self == UInt16.self { return .uint(UInt64(value as! UInt16)) }
        if T.self == UInt.self { return .uint(UInt64(value as! UInt)) }
        if T.self == Double.self { return .double(value as! Double) }
        if T.self == Float.self { return .double(Double(value as! Float)) }
        if T.self == Float16.self { return .double(Double(value as! Float16)) }
        if T.self == Int128.self { return try wide(value as! Int128, at: place) }
        if T.self == UInt128.self { return try wide(value as! UInt128, at: place) }
        if T.self == KeychainValue.self { return keychainValue(value as! KeychainValue) }
        if T.self == [String: KeychainValue].self { return keychainAttributes(value as! [String: KeychainValue]) }
        let encoder = BinaryWireEncoding(at: place)
        try value.encode(to: encoder)
        return encoder.value ?? .null
    }

    /// A keychain attribute's value is one of the wire's own kinds, told apart by its tag (a date
    /// is the one `double`): no object around it, as its `Codable` form has (`{"string": {"_0": …}}`,
    /// which JSON needs to tell a date or bytes from a number or text).
    private static func keychainValue(_ value: KeychainValue) -> BinaryWireValue {
        switch value {
        case .string(let s): return .string(s)
        case .data(let d): return .bytes(d)
        case .int(let i): return .int(i)
        case .bool(let b): return .bool(b)
        case .date(let d): return .double(d.timeIntervalSince1970)
        }
    }

    /// Attributes as `Dictionary`'s `encode(to:)` writes them (an object, a key per name), with
    /// no keyed container in between.
    private static func keychainAttributes(_ attributes: [String: KeychainValue]) -> BinaryWireValue {
        let object = BinaryWireContainer(isObject: true)
        object.keys.reserveCapacity(attributes.count)
        object.values.reserveCapacity(attributes.count)
        for (name, value) in attributes {
            object.keys.append(name)
            object.values.append(keychainValue(value))
        }
        return .container(object)
    }

    /// A 128-bit integer travels when it fits 64 bits, as an `int` or a `uint`.
    private static func wide<I: FixedWidthInteger>(_ v: I, at place: BinaryWirePlace) throws -> BinaryWireValue {
        if let signed = Int64(exactly: v) { return .int(signed) }
        if let unsigned = UInt64(exactly: v) { return .uint(unsigned) }
        throw EncodingError.invalidValue(
            v,
            .init(codingPath: place.codingPath, debugDescription: "a number past 64 bits")
        )
    }
}

/// Where a value is being written: under a key or at an index of its parent's container, or the
/// root. The coding path is made from it only when someone asks (an error, a type's own
/// `encode(to:)` reading it), not for every value on the way. A super encoder, which its parent's
/// container keeps, holds its path made (`path`): holding its parent would make a cycle.
enum BinaryWirePlace {
    case root
    case key(any CodingKey, in: BinaryWireEncoding)
    case index(Int, in: BinaryWireEncoding)
    case path([any CodingKey])

    var codingPath: [any CodingKey] {
        switch self {
        case .root: return []
        case .key(let key, let parent): return parent.codingPath + [key]
        case .index(let i, let parent): return parent.codingPath + [BinaryWirePathKey(i)]
        case .path(let path): return path
        }
    }
}

/// One value's `Encoder`.
final class BinaryWireEncoding: Encoder {
    let place: BinaryWirePlace
    var codingPath: [any CodingKey] { place.codingPath }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var value: BinaryWireValue?

    init(at place: BinaryWirePlace) { self.place = place }

    private func container(isObject: Bool) -> BinaryWireContainer {
        if case .container(let c)? = value, c.isObject == isObject { return c }
        let c = BinaryWireContainer(isObject: isObject)
        value = .container(c)
        return c
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(Keyed(container: container(isObject: true), owner: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        Unkeyed(container: container(isObject: false), owner: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { Single(encoder: self) }

    /// A keyed container: `owner` is the encoder whose value it is (a nested container has one of
    /// its own, which holds its place).
    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let container: BinaryWireContainer
        let owner: BinaryWireEncoding
        var codingPath: [any CodingKey] { owner.codingPath }

        private func put(_ value: BinaryWireValue, _ key: Key) {
            container.keys.append(key.stringValue)
            container.values.append(value)
        }

        mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
        mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
        mutating func encode(_ value: Int, forKey key: Key) throws { put(.int(Int64(value)), key) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { put(.int(value), key) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { put(.uint(value), key) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.uint(UInt64(value)), key) }
        mutating func encode(_ value: Double, forKey key: Key) throws { put(.double(value), key) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            put(try BinaryWireBox.box(value, at: .key(key, in: owner)), key)
        }
        // The protocol's own versions of these two throw "not implemented".
        mutating func encode(_ value: Int128, forKey key: Key) throws {
            put(try BinaryWireBox.box(value, at: .key(key, in: owner)), key)
        }
        mutating func encode(_ value: UInt128, forKey key: Key) throws {
            put(try BinaryWireBox.box(value, at: .key(key, in: owner)), key)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type,
            forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            let nested = BinaryWireContainer(isObject: true)
            put(.container(nested), key)
            let holder = BinaryWireEncoding(at: .key(key, in: owner))
            return KeyedEncodingContainer(Keyed<NestedKey>(container: nested, owner: holder))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let nested = BinaryWireContainer(isObject: false)
            put(.container(nested), key)
            return Unkeyed(container: nested, owner: BinaryWireEncoding(at: .key(key, in: owner)))
        }

        /// The value under "super", whatever keys `Key` has (as JSONEncoder's).
        mutating func superEncoder() -> any Encoder {
            let encoder = BinaryWireEncoding(at: .path(codingPath + [BinaryWirePathKey(stringValue: "super")]))
            container.keys.append("super")
            container.values.append(.encoder(encoder))
            return encoder
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            let encoder = BinaryWireEncoding(at: .path(codingPath + [key]))
            put(.encoder(encoder), key)
            return encoder
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let container: BinaryWireContainer
        let owner: BinaryWireEncoding
        var codingPath: [any CodingKey] { owner.codingPath }
        var count: Int { container.values.count }

        private var place: BinaryWirePlace { .index(count, in: owner) }

        mutating func encodeNil() throws { container.values.append(.null) }
        mutating func encode(_ value: Bool) throws { container.values.append(.bool(value)) }
        mutating func encode(_ value: String) throws { container.values.append(.string(value)) }
        mutating func encode(_ value: Int) throws { container.values.append(.int(Int64(value))) }
        mutating func encode(_ value: UInt8) throws { container.values.append(.uint(UInt64(value))) }
        mutating func encode(_ value: Double) throws { container.values.append(.double(value)) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            container.values.append(try BinaryWireBox.box(value, at: place))
        }
        mutating func encode(_ value: Int128) throws {
            container.values.append(try BinaryWireBox.box(value, at: place))
        }
        mutating func encode(_ value: UInt128) throws {
            container.values.append(try BinaryWireBox.box(value, at: place))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        )
            -> KeyedEncodingContainer<NestedKey>
        {
            let nested = BinaryWireContainer(isObject: true)
            let holder = BinaryWireEncoding(at: place)
            container.values.append(.container(nested))
            return KeyedEncodingContainer(Keyed<NestedKey>(container: nested, owner: holder))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let nested = BinaryWireContainer(isObject: false)
            let holder = BinaryWireEncoding(at: place)
            container.values.append(.container(nested))
            return Unkeyed(container: nested, owner: holder)
        }

        mutating func superEncoder() -> any Encoder {
            let encoder = BinaryWireEncoding(at: .path(place.codingPath))
            container.values.append(.encoder(encoder))
            return encoder
        }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: BinaryWireEncoding
        var codingPath: [any CodingKey] { encoder.codingPath }

        mutating func encodeNil() throws { encoder.value = .null }
        mutating func encode(_ value: Bool) throws { encoder.value = .bool(value) }
        mutating func encode(_ value: String) throws { encoder.value = .string(value) }
        mutating func encode(_ value: Int) throws { encoder.value = .int(Int64(value)) }
        mutating func encode(_ value: Int64) throws { encoder.value = .int(value) }
        mutating func encode(_ value: UInt64) throws { encoder.value = .uint(value) }
        mutating func encode(_ value: Double) throws { encoder.value = .double(value) }
        /// The value, in this encoder's own place: a type that encodes itself as one value is
        /// that value there.
        mutating func encode<T: Encodable>(_ value: T) throws {
            encoder.value = try BinaryWireBox.box(value, at: encoder.place)
        }
        mutating func encode(_ value: Int128) throws { encoder.value = try BinaryWireBox.box(value, at: encoder.place) }
        mutating func encode(_ value: UInt128) throws {
            encoder.value = try BinaryWireBox.box(value, at: encoder.place)
        }
    }
}

/// A place in a coding path that no `CodingKeys` names: an array item's index, or "super".
struct BinaryWirePathKey: CodingKey {
    let intValue: Int?
    private let name: String?
    /// Made only when a path is shown (an error), not for every item on the way.
    var stringValue: String { name ?? "\(intValue ?? 0)" }
    init(_ index: Int) {
        intValue = index
        name = nil
    }
    init(stringValue: String) {
        intValue = nil
        name = stringValue
    }
    init?(intValue: Int) { self.init(intValue) }
}
