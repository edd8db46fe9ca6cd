/// The arguments of one operation, exactly as they travel (a request's `args`), with the checks
/// that need nothing but the arguments: what fails them is refused as `invalidParameter` before
/// any work starts, and is never counted as an attempt.
public protocol RequestArguments: Codable, Sendable, Equatable {
    func validate() throws(Failure)
}

extension RequestArguments {
    public func validate() throws(Failure) {}
}

/// The checks arguments share.
public enum ArgumentChecks {
    public static func context(_ id: String) throws(Failure) {
        guard !id.isEmpty, id.utf8.count <= 64 else {
            throw Failure(.invalidParameter, "a context id has 1 to 64 bytes")
        }
    }

    public static func text(_ text: String?, _ name: String, allowEmpty: Bool = true) throws(Failure) {
        guard let text else { return }
        if !allowEmpty && text.isEmpty { throw Failure(.invalidParameter, "\(name) must not be empty") }
        if text.utf8.count > WireLimits.maxTextBytes {
            throw Failure(.invalidParameter, "\(name) is longer than \(WireLimits.maxTextBytes) bytes")
        }
    }

    /// A passcode longer than the wire limit can never be right: bad input, not a counted attempt.
    public static func passcodeLength(_ passcode: String?, _ name: String) throws(Failure) {
        guard let passcode else { return }
        if passcode.utf8.count > WireLimits.maxPasscodeBytes {
            throw Failure(.invalidParameter, "\(name) is longer than \(WireLimits.maxPasscodeBytes) bytes")
        }
    }

    public static func policy(_ raw: Int) throws(Failure) -> PolicyValue {
        guard let p = PolicyValue(rawValue: raw) else {
            throw Failure(.invalidParameter, "\(raw) is not an LAPolicy value")
        }
        return p
    }
}
