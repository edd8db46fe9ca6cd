/// What the wire's own reading refuses — a frame, or a payload that is no request — with a
/// stable code (the shape of GRDB's `DatabaseError`, as the daemon's `DaemonError`), and the
/// answer the daemon sends for each said once (`failure`).
public struct WireError: Error, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// A frame whose declared length is past `WireLimits.maxPayloadBytes`.
        case oversizedFrame
        /// A frame with an empty payload.
        case emptyFrame
        /// The peer closed the stream in the middle of a frame.
        case truncatedFrame
        /// A payload that is no request object with a numeric "id" and a string "op".
        case malformed
        case unknownOperation
        /// A known operation whose arguments do not decode.
        case invalidArguments
    }

    public var code: Code
    /// The request's id when its header could be read, so that the answer is matched to it.
    public var id: UInt64?
    public var message: String

    public init(_ code: Code, _ message: String, id: UInt64? = nil) {
        self.code = code
        self.message = message
        self.id = id
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The daemon's answer: an unknown operation and arguments that do not decode are the
    /// request's fault, anything else a message that could not be read (after a broken frame the
    /// connection closes, since nothing after it can be found).
    public var failure: Failure {
        switch code {
        case .unknownOperation: Failure(.unknownOperation, message)
        case .invalidArguments: Failure(.invalidParameter, message)
        case .oversizedFrame, .emptyFrame, .truncatedFrame, .malformed: Failure(.malformedMessage, message)
        }
    }

    public static func oversizedFrame(declared: Int) -> WireError {
        WireError(
            .oversizedFrame,
            "frame of \(declared) bytes exceeds the limit of \(WireLimits.maxPayloadBytes) bytes"
        )
    }

    public static let emptyFrame = WireError(.emptyFrame, "frame with an empty payload")

    public static func truncatedFrame(pendingBytes: Int) -> WireError {
        WireError(.truncatedFrame, "stream ended inside a frame (\(pendingBytes) bytes pending)")
    }
}
