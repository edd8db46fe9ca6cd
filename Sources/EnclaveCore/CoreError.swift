/// What the rules refuse as malformed or unopenable: `EnclaveCore`'s one error type (GRDB's
/// `DatabaseError` shape). `code` is what a caller decides on; `message` says it in words. The
/// rules' decisions keep their own vocabularies: an access denial is `AccessDenial` (a typed
/// throw), a connection's refusal the wire's `Failure` it is answered with, and a protection that
/// cannot be made a `CreationProblem` value.
public struct CoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// `SecAccessControlCreateFlags` with both `and` and `or`.
        case accessControlAndWithOr
        /// `SecAccessControlCreateFlags` bits Apple does not define.
        case unknownAccessControlFlags
        /// A sealed item that does not open with its key: another key's, or tampered with.
        case wrongKeyOrTampered
        case applicationPasswordNeeded
        case wrongApplicationPassword
        case passcodeTooShort
        case passcodeTooLong
        /// A keyed passcode verifier asked without its key.
        case verifierKeyNeeded
        /// A verifier that moved to another key already.
        case verifierMovedAlready
        /// The daemon's settings file (`line` says where; 0: the file as a whole).
        case settings
    }

    public let code: Code
    public let message: String
    /// With `settings`: the line of the file.
    public let line: Int?

    public init(_ code: Code, _ message: String, line: Int? = nil) {
        self.code = code
        self.message = message
        self.line = line
    }

    /// The settings file refused at `line` (0: the file as a whole).
    public static func settings(line: Int, _ message: String) -> CoreError {
        CoreError(.settings, message, line: line)
    }

    public var description: String { line.map { "line \($0): \(message)" } ?? message }
}
