/// Length-prefixed framing: a 4-byte big-endian payload length, then the payload (one JSON message).
///
/// The decoder is a pure value so that the daemon (through a thin SwiftNIO adapter), the client
/// library and the fuzz target all share one implementation of the rules.
public enum WireLimits {
    /// The largest payload either side accepts. Requests are small (a policy, a reason, a
    /// passcode); 64 KiB leaves room for audit listings while bounding memory per connection.
    public static let maxPayloadBytes = 64 * 1024
    public static let headerBytes = 4
    /// Longest accepted `localizedReason`, titles, identity names and passcodes, in UTF-8 bytes.
    public static let maxTextBytes = 1024
    public static let maxPasscodeBytes = 256
    public static let maxQueuedEvents = 64
}

public struct FrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var readIndex = 0

    public init() {}

    public mutating func append<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        if readIndex > 0 && readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete payload, `nil` when more bytes are needed. Broken framing throws; the
    /// stream cannot be resynchronised after that and must be closed.
    public mutating func nextFrame() throws(WireError) -> [UInt8]? {
        let available = buffer.count - readIndex
        guard available >= WireLimits.headerBytes else { return nil }
        var length = 0
        for i in 0..<WireLimits.headerBytes { length = length << 8 | Int(buffer[readIndex + i]) }
        guard length > 0 else { throw WireError.emptyFrame }
        guard length <= WireLimits.maxPayloadBytes else { throw WireError.oversizedFrame(declared: length) }
        guard available >= WireLimits.headerBytes + length else { return nil }
        let start = readIndex + WireLimits.headerBytes
        let payload = Array(buffer[start..<start + length])
        readIndex = start + length
        if readIndex > 4096 && readIndex * 2 > buffer.count {
            buffer.removeFirst(readIndex)
            readIndex = 0
        }
        return payload
    }

    /// Whether bytes of another message wait behind the last one taken: the peer sent it before
    /// the last was answered.
    public var holdsMore: Bool { buffer.count > readIndex }

    /// Call when the peer has closed: bytes of an unfinished frame are an error.
    public func finish() throws(WireError) {
        let pending = buffer.count - readIndex
        if pending > 0 { throw WireError.truncatedFrame(pendingBytes: pending) }
    }
}

public enum FrameEncoder {
    /// The frame for `payload`, or `WireError.oversizedFrame` when it exceeds the wire limit. Every
    /// path that frames what a peer caused (a reply's size depends on the request) uses this.
    public static func checkedFrame(_ payload: [UInt8]) throws -> [UInt8] {
        guard !payload.isEmpty else { throw WireError.emptyFrame }
        guard payload.count <= WireLimits.maxPayloadBytes else {
            throw WireError.oversizedFrame(declared: payload.count)
        }
        let n = UInt32(payload.count)
        return [UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
    }

    /// For payloads known to fit (tests, fixed messages).
    public static func frame(_ payload: [UInt8]) -> [UInt8] {
        do { return try checkedFrame(payload) } catch { preconditionFailure("payload over the wire limit") }
    }
}
