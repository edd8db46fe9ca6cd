import Foundation

extension CBOR {
    /// Deepest container nesting accepted. WebAuthn structures nest at most a few levels; the cap
    /// bounds recursion so hostile input cannot exhaust the stack.
    public static let maxNestingDepth = 16
    /// Most data items (keys, values and elements all count) accepted in one decode, bounding the
    /// work and memory a hostile input can cost.
    public static let maxItemCount = 4096

    /// Decodes exactly one data item spanning all of `data`; trailing bytes are an error.
    public static func decode(_ data: Data) throws -> CBOR {
        let (value, length) = try decodePrefix(data)
        guard length == data.count else {
            throw WebAuthnError(.malformedCBOR, "\(data.count - length) trailing byte(s) after the CBOR data item")
        }
        return value
    }

    /// Decodes the data item at the start of `data` and reports how many bytes it used.
    ///
    /// Used where a CBOR item is followed by other data, like the credential public key inside
    /// authenticator data.
    public static func decodePrefix(_ data: Data) throws -> (value: CBOR, length: Int) {
        var decoder = StrictDecoder(bytes: [UInt8](data))
        let value = try decoder.readItem(containerDepth: 0)
        return (value, decoder.position)
    }
}

/// A single-pass decoder that rejects everything WebAuthn does not need and everything that could
/// make decoding costly: indefinite lengths, reserved values, tags, simple values other than
/// false/true/null/undefined, lengths beyond the input, invalid UTF-8, duplicate map keys, and
/// inputs beyond the depth and item limits.
///
/// Non-shortest integer and length encodings are accepted: they are unambiguous, and some
/// authenticators emit them. Callers who need the exact bytes keep the original input.
private struct StrictDecoder {
    let bytes: [UInt8]
    var position = 0
    var itemCount = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    var remaining: Int { bytes.count - position }

    mutating func readItem(containerDepth: Int) throws -> CBOR {
        itemCount += 1
        guard itemCount <= CBOR.maxItemCount else {
            throw malformed("more than \(CBOR.maxItemCount) data items")
        }
        let initial = try readByte()
        let majorType = initial >> 5
        let additional = initial & 0x1F

        if majorType == 7 {
            return try readSimpleOrFloat(additional)
        }
        if majorType == 6 {
            throw malformed("CBOR tags (major type 6) are not supported: WebAuthn data never uses them")
        }
        let argument = try readArgument(additional)

        switch majorType {
        case 0:
            return .unsigned(argument)
        case 1:
            return .negative(argument)
        case 2:
            return .bytes(Data(try readBytes(count: argument)))
        case 3:
            let raw = try readBytes(count: argument)
            // Decoding repairs invalid sequences with U+FFFD; if the bytes changed, they were invalid.
            let text = String(decoding: raw, as: UTF8.self)
            guard text.utf8.elementsEqual(raw) else {
                throw malformed("text string is not valid UTF-8")
            }
            return .text(text)
        case 4:
            let count = try containerCount(argument, bytesPerEntry: 1, depth: containerDepth)
            var elements = [CBOR]()
            elements.reserveCapacity(count)
            for _ in 0..<count {
                elements.append(try readItem(containerDepth: containerDepth + 1))
            }
            return .array(elements)
        case 5:
            let count = try containerCount(argument, bytesPerEntry: 2, depth: containerDepth)
            var entries = [(key: CBOR, value: CBOR)]()
            entries.reserveCapacity(count)
            var seenKeys = Set<CBOR>()
            for _ in 0..<count {
                let key = try readItem(containerDepth: containerDepth + 1)
                guard seenKeys.insert(key).inserted else {
                    throw malformed("duplicate map key")
                }
                let value = try readItem(containerDepth: containerDepth + 1)
                entries.append((key: key, value: value))
            }
            return .map(entries)
        default:
            preconditionFailure("major types are 3 bits")
        }
    }

    /// Validates a container's declared size before anything is allocated for it: every entry
    /// takes at least one byte per item, so a count beyond the remaining input is a lie.
    private func containerCount(_ declared: UInt64, bytesPerEntry: UInt64, depth: Int) throws -> Int {
        guard depth < CBOR.maxNestingDepth else {
            throw malformed("nesting deeper than \(CBOR.maxNestingDepth) levels")
        }
        guard declared <= UInt64(remaining) / bytesPerEntry else {
            throw malformed("container declares \(declared) entries but only \(remaining) byte(s) remain")
        }
        guard declared * bytesPerEntry <= UInt64(CBOR.maxItemCount - itemCount) else {
            throw malformed("more than \(CBOR.maxItemCount) data items")
        }
        return Int(declared)
    }

    private mutating func readSimpleOrFloat(_ additional: UInt8) throws -> CBOR {
        switch additional {
        case 20: return .bool(false)
        case 21: return .bool(true)
        case 22: return .null
        case 23: return .undefined
        case 25:
            let bits = try readBytes(count: 2).reduce(UInt16(0)) { $0 << 8 | UInt16($1) }
            return .float(Self.canonical(Self.double(fromHalf: bits)))
        case 26:
            let bits = try readBytes(count: 4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            return .float(Self.canonical(Double(Float(bitPattern: bits))))
        case 27:
            let bits = try readBytes(count: 8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return .float(Self.canonical(Double(bitPattern: bits)))
        case 31:
            throw malformed("unexpected \"break\": indefinite-length items are not supported")
        case 28...30:
            throw malformed("reserved additional information value \(additional)")
        default:
            throw malformed("unsupported simple value")
        }
    }

    /// The argument of a head: the value itself, a length, or a count.
    private mutating func readArgument(_ additional: UInt8) throws -> UInt64 {
        switch additional {
        case 0..<24:
            return UInt64(additional)
        case 24, 25, 26, 27:
            let width = 1 << Int(additional - 24)
            return try readBytes(count: UInt64(width)).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        case 31:
            throw malformed("indefinite-length items are not supported")
        default:
            throw malformed("reserved additional information value \(additional)")
        }
    }

    private mutating func readByte() throws -> UInt8 {
        guard position < bytes.count else { throw malformed("input ends in the middle of a data item") }
        defer { position += 1 }
        return bytes[position]
    }

    /// Reads `count` bytes, checking the count against the remaining input first so a header
    /// claiming a huge length costs nothing.
    private mutating func readBytes(count: UInt64) throws -> ArraySlice<UInt8> {
        guard count <= UInt64(remaining) else {
            throw malformed("declared length \(count) exceeds the \(remaining) byte(s) remaining")
        }
        let start = position
        position += Int(count)
        return bytes[start..<position]
    }

    private func malformed(_ message: String) -> WebAuthnError {
        WebAuthnError(.malformedCBOR, "\(message) (at byte \(position))")
    }

    /// Every NaN as the one NaN (RFC 8949 §4.2.2: payloads and signs of NaNs carry nothing here),
    /// which is also the only one `encoded()` writes: what decodes, re-encodes to the same value.
    /// (Found by the fuzzer: a half-precision NaN with its sign set did not survive the round trip.)
    static func canonical(_ value: Double) -> Double { value.isNaN ? .nan : value }

    /// IEEE 754 binary16 to Double, per RFC 8949 Appendix D.
    static func double(fromHalf half: UInt16) -> Double {
        let exponent = Int(half >> 10) & 0x1F
        let mantissa = Double(half & 0x3FF)
        let magnitude: Double
        switch exponent {
        case 0: magnitude = Double(sign: .plus, exponent: -24, significand: mantissa)
        case 31: magnitude = mantissa == 0 ? .infinity : .nan
        default: magnitude = Double(sign: .plus, exponent: exponent - 25, significand: mantissa + 1024)
        }
        return half & 0x8000 != 0 ? -magnitude : magnitude
    }
}
