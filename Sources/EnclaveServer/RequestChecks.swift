import EnclaveCore
import EnclaveProtocol

/// The argument checks requests share, before any work starts: bad input is refused with
/// `invalidParameter`, never counted as an attempt.
enum RequestChecks {
    static func policy(_ raw: Int) throws(Failure) -> PolicyValue {
        guard let p = PolicyValue(rawValue: raw) else { throw Failure(.invalidParameter, "\(raw) is not an LAPolicy value") }
        return p
    }

    static func context(_ id: String) throws(Failure) {
        guard !id.isEmpty, id.utf8.count <= 64 else { throw Failure(.invalidParameter, "a context id has 1 to 64 bytes") }
    }

    static func text(_ text: String?, _ name: String, allowEmpty: Bool = true) throws(Failure) {
        guard let text else { return }
        if !allowEmpty && text.isEmpty { throw Failure(.invalidParameter, "\(name) must not be empty") }
        if text.utf8.count > WireLimits.maxTextBytes { throw Failure(.invalidParameter, "\(name) is longer than \(WireLimits.maxTextBytes) bytes") }
    }

    /// A passcode longer than the wire limit can never be right: bad input, not a counted attempt.
    static func passcodeLength(_ passcode: String?, _ name: String) throws(Failure) {
        guard let passcode else { return }
        if passcode.utf8.count > WireLimits.maxPasscodeBytes { throw Failure(.invalidParameter, "\(name) is longer than \(WireLimits.maxPasscodeBytes) bytes") }
    }

    /// What `evaluatePolicy` and `evaluateAccessControl` are given to show.
    static func options(_ options: EvaluationOptions) throws(Failure) {
        try text(options.reason, "localizedReason", allowEmpty: false)
        try text(options.cancelTitle, "localizedCancelTitle")
        try text(options.fallbackTitle, "localizedFallbackTitle")
        guard options.reuseDuration.isFinite, options.reuseDuration >= 0 else {
            throw Failure(.invalidParameter, "touchIDAuthenticationAllowableReuseDuration must be a finite number ≥ 0")
        }
    }
}
