import Foundation

/// A CBOR data item (RFC 8949), limited to what WebAuthn needs.
///
/// There is no case for tags: WebAuthn structures never use them, and the decoder rejects them.
/// Map entries keep their wire order, which `encoded()` reproduces and equality respects.
public indirect enum CBOR: Equatable, Hashable, Sendable {
    case unsigned(UInt64)
    /// A negative integer whose value is `-1 - n`, so the whole CBOR range fits.
    case negative(UInt64)
    case bytes(Data)
    case text(String)
    case array([CBOR])
    case map([(key: CBOR, value: CBOR)])
    case bool(Bool)
    case null
    case undefined
    case float(Double)

    /// The CBOR integer for a Swift `Int`.
    public static func int(_ value: Int) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    public static func == (lhs: CBOR, rhs: CBOR) -> Bool {
        switch (lhs, rhs) {
        case let (.unsigned(a), .unsigned(b)): return a == b
        case let (.negative(a), .negative(b)): return a == b
        case let (.bytes(a), .bytes(b)): return a == b
        case let (.text(a), .text(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.map(a), .map(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case let (.bool(a), .bool(b)): return a == b
        case (.null, .null), (.undefined, .undefined): return true
        // Bit patterns, not IEEE equality: NaN must equal itself for Hashable (and duplicate-key
        // detection) to be sound, and 0.0 and -0.0 are distinct data items.
        case let (.float(a), .float(b)): return a.bitPattern == b.bitPattern
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let v):
            hasher.combine(0)
            hasher.combine(v)
        case .negative(let v):
            hasher.combine(1)
            hasher.combine(v)
        case .bytes(let v):
            hasher.combine(2)
            hasher.combine(v)
        case .text(let v):
            hasher.combine(3)
            hasher.combine(v)
        case .array(let v):
            hasher.combine(4)
            hasher.combine(v)
        case .map(let entries):
            hasher.combine(5)
            hasher.combine(entries.count)
            for entry in entries {
                hasher.combine(entry.key)
                hasher.combine(entry.value)
            }
        case .bool(let v):
            hasher.combine(6)
            hasher.combine(v)
        case .null: hasher.combine(7)
        case .undefined: hasher.combine(8)
        case .float(let v):
            hasher.combine(9)
            hasher.combine(v.bitPattern)
        }
    }
}

// MARK: - Accessors

extension CBOR {
    /// The value for an integer key, if this is a map containing it.
    public subscript(key: Int) -> CBOR? {
        self[CBOR.int(key)]
    }

    /// The value for a text key, if this is a map containing it.
    public subscript(key: String) -> CBOR? {
        self[CBOR.text(key)]
    }

    /// The value for any key, if this is a map containing it.
    public subscript(key: CBOR) -> CBOR? {
        guard case .map(let entries) = self else { return nil }
        return entries.first(where: { $0.key == key })?.value
    }

    /// The integer value, if this is an integer that fits in `Int`.
    public var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    public var bytesValue: Data? {
        if case .bytes(let value) = self { return value }
        return nil
    }

    public var textValue: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    public var arrayValue: [CBOR]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var mapValue: [(key: CBOR, value: CBOR)]? {
        if case .map(let value) = self { return value }
        return nil
    }
}
