import Foundation

/// Reads the TPM's big-endian marshalling (TPM 2.0 Part 2): fixed-size integers and `TPM2B_`
/// buffers (a 16-bit size, then the bytes). Every read is bounded: a short buffer is an error.
struct TPMReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 { self.bytes = Array(bytes) }

    var atEnd: Bool { offset == bytes.count }

    mutating func uint8() throws(TPMWireError) -> UInt8 { try take(1)[0] }

    mutating func uint16() throws(TPMWireError) -> UInt16 {
        try take(2).reduce(0) { $0 << 8 | UInt16($1) }
    }

    mutating func uint32() throws(TPMWireError) -> UInt32 {
        try take(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64() throws(TPMWireError) -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A `TPM2B_`: its size, then that many bytes.
    mutating func sized() throws(TPMWireError) -> [UInt8] { try take(Int(uint16())) }

    mutating func take(_ count: Int) throws(TPMWireError) -> [UInt8] {
        guard count >= 0, bytes.count - offset >= count else { throw .truncated }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    func expectEnd() throws(TPMWireError) {
        guard atEnd else { throw .trailingBytes }
    }
}

/// Writes the TPM's marshalling.
struct TPMWriter {
    private(set) var bytes: [UInt8] = []

    mutating func uint16(_ value: UInt16) { bytes += [UInt8(value >> 8), UInt8(value & 0xFF)] }

    mutating func uint32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// A `TPM2B_` of `data` (at most 65535 bytes, which every caller's data is far below).
    mutating func sized<Bytes: Collection>(_ data: Bytes) where Bytes.Element == UInt8 {
        uint16(UInt16(data.count))
        bytes += data
    }

    mutating func raw<Bytes: Sequence>(_ data: Bytes) where Bytes.Element == UInt8 { bytes += data }
}

public enum TPMWireError: Error, Equatable, CustomStringConvertible {
    case truncated
    case trailingBytes
    /// A value this code does not take (an algorithm, a curve, a structure's tag).
    case unsupported(String)

    public var description: String {
        switch self {
        case .truncated: "a TPM structure ends early"
        case .trailingBytes: "a TPM structure has bytes after its end"
        case .unsupported(let what): "unsupported in a TPM structure: \(what)"
        }
    }
}
