import Foundation

extension BinaryWire {
    /// Reads what `encode` wrote. Anything else — cut short, a length past its end, a tag that
    /// is no tag, text that is not UTF-8, a value of another type — throws `DecodingError`; the
    /// reader never reads past the bytes it was given, and steps over values by their lengths,
    /// so no input makes it recurse deeper than the type it decodes.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let reader = BinaryWireReader(bytes)
        let end = try reader.end(ofValueAt: 0, within: bytes.count, codingPath: [])
        guard end == bytes.count else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "bytes after the value"))
        }
        return try BinaryWireDecoding(reader: reader, offset: 0, parentPath: [], step: nil).unbox(type)
    }
}

/// The bytes of one message, read with bounds checked. A coding path is passed as an autoclosure:
/// it is made only for an error.
final class BinaryWireReader {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func corrupted(_ why: String, _ codingPath: [any CodingKey]) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: why))
    }

    /// The varint at `offset` and the offset after it. Cut short, longer than 10 bytes, or past
    /// 64 bits: corrupted.
    func varint(
        at offset: Int,
        within limit: Int,
        _ codingPath: @autoclosure () -> [any CodingKey]
    ) throws -> (UInt64, next: Int) {
        var value: UInt64 = 0
        var at = offset
        for shift in stride(from: 0, to: 70, by: 7) {
            guard at >= 0, at < limit else { throw corrupted("cut short", codingPath()) }
            let byte = bytes[at]
            at += 1
            guard shift < 63 || byte <= 1 else { throw corrupted("a number past 64 bits", codingPath()) }
            value |= UInt64(byte & 0x7F) << UInt64(shift)
            if byte < 0x80 { return (value, at) }
        }
        throw corrupted("a number past 64 bits", codingPath())
    }

    /// A varint length or count at `offset`, and the offset after it: at most what is left
    /// before `limit`.
    func length(
        at offset: Int,
        within limit: Int,
        _ codingPath: @autoclosure () -> [any CodingKey]
    ) throws -> (Int, next: Int) {
        let (value, next) = try varint(at: offset, within: limit, codingPath())
        guard value <= UInt64(limit - next) else { throw corrupted("a length past the end", codingPath()) }
        return (Int(value), next)
    }

    /// The number of an `int` or `uint` value at `offset` (whose end was checked).
    func integer(at offset: Int) -> (signed: Int64?, unsigned: UInt64?) {
        guard let raw = try? varint(at: offset + 1, within: bytes.count, []).0 else { return (nil, nil) }
        switch bytes[offset] {
        case BinaryWire.Tag.int.rawValue: return (Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))), nil)
        case BinaryWire.Tag.uint.rawValue: return (nil, raw)
        default: return (nil, nil)
        }
    }

    func double(at offset: Int) -> Double {
        var bits: UInt64 = 0
        for i in 0..<8 { bits |= UInt64(bytes[offset + 1 + i]) << UInt64(8 * i) }
        return Double(bitPattern: bits)
    }

    func tag(at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> BinaryWire.Tag {
        guard offset < bytes.count else { throw corrupted("cut short", codingPath()) }
        guard let tag = BinaryWire.Tag(rawValue: bytes[offset]) else {
            throw corrupted("no value has tag \(bytes[offset])", codingPath())
        }
        return tag
    }

    /// Where the value at `offset` ends, checked to lie within `limit`.
    func end(
        ofValueAt offset: Int,
        within limit: Int,
        codingPath: @autoclosure () -> [any CodingKey]
    ) throws -> Int {
        let end: Int
        switch try tag(at: offset, codingPath()) {
        case .null, .false, .true: end = offset + 1
        case .int, .uint: end = try varint(at: offset + 1, within: limit, codingPath()).next
        case .double: end = offset + 9
        case .string, .bytes, .array, .object:
            let (length, body) = try length(at: offset + 1, within: limit, codingPath())
            end = body + length
        }
        guard end <= limit else { throw corrupted("a value runs past its end", codingPath()) }
        return end
    }

    /// The bytes of a `string` or `bytes` value at `offset` (whose end was checked).
    func payload(at offset: Int) -> Range<Int> {
        guard let found = try? length(at: offset + 1, within: bytes.count, []) else { return offset..<offset }
        return found.next..<found.next + found.0
    }

    func text(_ range: Range<Int>, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> String {
        guard let s = String(validating: bytes[range], as: UTF8.self) else {
            throw corrupted("text that is not UTF-8", codingPath())
        }
        return s
    }

    /// The items of the array or object at `offset`: each value's offset (and an object's keys'
    /// byte ranges), every one checked to lie within the container.
    func items(
        at offset: Int,
        object: Bool,
        _ codingPath: @autoclosure () -> [any CodingKey]
    ) throws -> (keys: [Range<Int>], values: [Int]) {
        let expected: BinaryWire.Tag = object ? .object : .array
        guard try tag(at: offset, codingPath()) == expected else {
            throw DecodingError.typeMismatch(
                object ? [String: Any].self : [Any].self,
                .init(codingPath: codingPath(), debugDescription: "expected \(object ? "an object" : "an array")")
            )
        }
        let (bodyLength, body) = try length(at: offset + 1, within: bytes.count, codingPath())
        let limit = body + bodyLength
        var (count, at) = try length(at: body, within: limit, codingPath())
        // Each item takes a byte at least (`length` checked the count against the bytes left): a
        // count that lies is refused before anything is reserved for it.
        var keys: [Range<Int>] = []
        var values: [Int] = []
        values.reserveCapacity(count)
        if object { keys.reserveCapacity(count) }
        while count > 0 {
            count -= 1
            if object {
                let (keyLength, start) = try length(at: at, within: limit, codingPath())
                let key = start..<start + keyLength
                // A key is text, as in JSON: checked here, so no container drops one it cannot read.
                if bytes[key].contains(where: { $0 >= 0x80 }), String(validating: bytes[key], as: UTF8.self) == nil {
                    throw corrupted("a key that is not UTF-8", codingPath())
                }
                keys.append(key)
                at = key.upperBound
            }
            values.append(at)
            at = try end(ofValueAt: at, within: limit, codingPath: codingPath())
        }
        guard at == limit else { throw corrupted("bytes after the last item", codingPath()) }
        return (keys, values)
    }
}
