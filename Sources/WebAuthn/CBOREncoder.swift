import Foundation

extension CBOR {
    /// Encodes with definite lengths and shortest-form heads, map entries in the order given.
    ///
    /// That is CTAP2's canonical form whenever the map keys are supplied in canonical order, which
    /// is what an authenticator must produce. Floats use the shortest of half, single and double
    /// precision that represents the value exactly.
    public func encoded() -> Data {
        var out = [UInt8]()
        append(to: &out)
        return Data(out)
    }

    private func append(to out: inout [UInt8]) {
        switch self {
        case .unsigned(let value):
            Self.appendHead(major: 0, argument: value, to: &out)
        case .negative(let value):
            Self.appendHead(major: 1, argument: value, to: &out)
        case .bytes(let value):
            Self.appendHead(major: 2, argument: UInt64(value.count), to: &out)
            out.append(contentsOf: value)
        case .text(let value):
            Self.appendHead(major: 3, argument: UInt64(value.utf8.count), to: &out)
            out.append(contentsOf: value.utf8)
        case .array(let elements):
            Self.appendHead(major: 4, argument: UInt64(elements.count), to: &out)
            for element in elements { element.append(to: &out) }
        case .map(let entries):
            Self.appendHead(major: 5, argument: UInt64(entries.count), to: &out)
            for entry in entries {
                entry.key.append(to: &out)
                entry.value.append(to: &out)
            }
        case .bool(let value):
            out.append(value ? 0xF5 : 0xF4)
        case .null:
            out.append(0xF6)
        case .undefined:
            out.append(0xF7)
        case .float(let value):
            Self.appendFloat(value, to: &out)
        }
    }

    private static func appendHead(major: UInt8, argument: UInt64, to out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24:
            out.append(type | UInt8(argument))
        case 24...0xFF:
            out.append(type | 24)
            out.append(UInt8(argument))
        case 0x100...0xFFFF:
            out.append(type | 25)
            appendBigEndian(argument, width: 2, to: &out)
        case 0x1_0000...0xFFFF_FFFF:
            out.append(type | 26)
            appendBigEndian(argument, width: 4, to: &out)
        default:
            out.append(type | 27)
            appendBigEndian(argument, width: 8, to: &out)
        }
    }

    private static func appendBigEndian(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        for index in stride(from: width - 1, through: 0, by: -1) {
            out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))))
        }
    }

    private static func appendFloat(_ value: Double, to out: inout [UInt8]) {
        if let half = halfPrecisionBits(value) {
            out.append(0xF9)
            appendBigEndian(UInt64(half), width: 2, to: &out)
        } else if Double(Float(value)) == value {
            out.append(0xFA)
            appendBigEndian(UInt64(Float(value).bitPattern), width: 4, to: &out)
        } else {
            out.append(0xFB)
            appendBigEndian(value.bitPattern, width: 8, to: &out)
        }
    }

    /// The binary16 encoding of `value` if it is exactly representable in half precision.
    private static func halfPrecisionBits(_ value: Double) -> UInt16? {
        let sign: UInt16 = value.sign == .minus ? 0x8000 : 0
        if value.isNaN { return 0x7E00 }
        if value.isInfinite { return sign | 0x7C00 }
        if value == 0 { return sign }
        let magnitude = value.magnitude
        if magnitude >= 0x1p-14 {
            // Normal half: exponent -14...15, 10 fraction bits (the low 42 of Double's 52 must be zero).
            guard magnitude.exponent <= 15, magnitude.significandBitPattern & ((1 << 42) - 1) == 0 else { return nil }
            let exponent = UInt16(magnitude.exponent + 15)
            let fraction = UInt16(magnitude.significandBitPattern >> 42)
            return sign | exponent << 10 | fraction
        }
        // Subnormal half: an integer multiple of 2^-24 below 2^-14.
        let units = magnitude * 0x1p24
        guard units == units.rounded(.towardZero) else { return nil }
        return sign | UInt16(units)
    }
}
