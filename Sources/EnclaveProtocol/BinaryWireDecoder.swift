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
        return try BinaryWireDecoding(reader: reader, offset: 0, codingPath: []).unbox(type)
    }
}

/// The bytes of one message, read with bounds checked.
final class BinaryWireReader {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func corrupted(_ why: String, _ codingPath: [any CodingKey]) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: why))
    }

    func uint32(at offset: Int, within limit: Int, _ codingPath: [any CodingKey]) throws -> Int {
        guard offset >= 0, offset + 4 <= limit else { throw corrupted("cut short", codingPath) }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * i) }
        guard let length = Int(exactly: v), length <= limit else {
            throw corrupted("a length past the end", codingPath)
        }
        return length
    }

    func uint64(at offset: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[offset + i]) << (8 * i) }
        return v
    }

    func tag(at offset: Int, _ codingPath: [any CodingKey]) throws -> BinaryWire.Tag {
        guard offset < bytes.count else { throw corrupted("cut short", codingPath) }
        guard let tag = BinaryWire.Tag(rawValue: bytes[offset]) else {
            throw corrupted("no value has tag \(bytes[offset])", codingPath)
        }
        return tag
    }

    /// Where the value at `offset` ends, checked to lie within `limit`.
    func end(ofValueAt offset: Int, within limit: Int, codingPath: [any CodingKey]) throws -> Int {
        let end: Int
        switch try tag(at: offset, codingPath) {
        case .null, .false, .true: end = offset + 1
        case .int, .uint, .double: end = offset + 9
        case .string, .bytes, .array, .object:
            end = offset + 5 + (try uint32(at: offset + 1, within: limit, codingPath))
        }
        guard end <= limit else { throw corrupted("a value runs past its end", codingPath) }
        return end
    }

    /// The bytes of a `string` or `bytes` value at `offset` (whose end was checked).
    func payload(at offset: Int) -> Range<Int> {
        let length = (try? uint32(at: offset + 1, within: bytes.count, [])) ?? 0
        return offset + 5..<offset + 5 + length
    }

    func text(_ range: Range<Int>, _ codingPath: [any CodingKey]) throws -> String {
        guard let s = String(validating: bytes[range], as: UTF8.self) else {
            throw corrupted("text that is not UTF-8", codingPath)
        }
        return s
    }

    /// The items of the array or object at `offset`: each value's offset (and an object's keys'
    /// byte ranges), every one checked to lie within the container.
    func items(
        at offset: Int,
        object: Bool,
        _ codingPath: [any CodingKey]
    ) throws -> (keys: [Range<Int>], values: [Int]) {
        let expected: BinaryWire.Tag = object ? .object : .array
        guard try tag(at: offset, codingPath) == expected else {
            throw DecodingError.typeMismatch(
                object ? [String: Any].self : [Any].self,
                .init(codingPath: codingPath, debugDescription: "expected \(object ? "an object" : "an array")")
            )
        }
        let limit = try end(ofValueAt: offset, within: bytes.count, codingPath: codingPath)
        let count = try uint32(at: offset + 5, within: limit, codingPath)
        // Each item takes a byte at least: a count beyond the bytes is a lie, not a reason to reserve.
        guard count <= limit - offset - 9 else { throw corrupted("more items than bytes", codingPath) }
        var keys: [Range<Int>] = []
        var values: [Int] = []
        values.reserveCapacity(count)
        if object { keys.reserveCapacity(count) }
        var at = offset + 9
        for _ in 0..<count {
            if object {
                let length = try uint32(at: at, within: limit, codingPath)
                guard at + 4 + length <= limit else { throw corrupted("a key runs past its end", codingPath) }
                let key = at + 4..<at + 4 + length
                // A key is text, as in JSON: checked here, so no container drops one it cannot read.
                if bytes[key].contains(where: { $0 >= 0x80 }), String(validating: bytes[key], as: UTF8.self) == nil {
                    throw corrupted("a key that is not UTF-8", codingPath)
                }
                keys.append(key)
                at += 4 + length
            }
            values.append(at)
            at = try end(ofValueAt: at, within: limit, codingPath: codingPath)
        }
        guard at == limit else { throw corrupted("bytes after the last item", codingPath) }
        return (keys, values)
    }
}
