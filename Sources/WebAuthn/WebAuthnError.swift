/// The single error type of this module.
///
/// `code` is stable and meant for programs (logs, metrics, HTTP problem details); `message` is for
/// humans. Messages never contain more than a short, sanitised prefix of attacker-controlled input,
/// so they are safe to log.
public struct WebAuthnError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case malformedCBOR = "malformed_cbor"
        case malformedClientData = "malformed_client_data"
        case malformedAuthenticatorData = "malformed_authenticator_data"
        case malformedAttestation = "malformed_attestation"
        case unsupportedAttestationFormat = "unsupported_attestation_format"
        case attestationSignatureInvalid = "attestation_signature_invalid"
        case unsupportedAlgorithm = "unsupported_algorithm"
        case malformedPublicKey = "malformed_public_key"
        case wrongType = "wrong_type"
        case challengeMismatch = "challenge_mismatch"
        case originMismatch = "origin_mismatch"
        case crossOriginNotAllowed = "cross_origin_not_allowed"
        case rpIDMismatch = "rp_id_mismatch"
        case userNotPresent = "user_not_present"
        case userNotVerified = "user_not_verified"
        case credentialIDMismatch = "credential_id_mismatch"
        case signatureInvalid = "signature_invalid"
        case counterRegression = "counter_regression"
        case tooLarge = "too_large"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

extension WebAuthnError {
    /// How many characters of untrusted input a message may quote.
    static let quoteLimit = 32

    /// A short, log-safe rendering of untrusted text: at most `quoteLimit` characters, anything
    /// outside printable ASCII replaced, so a hostile value cannot forge log lines or bloat them.
    static func quote(_ untrusted: String) -> String {
        var out = ""
        var count = 0
        for scalar in untrusted.unicodeScalars {
            if count == quoteLimit {
                out += "…"
                break
            }
            let isPrintableASCII = scalar.value >= 0x20 && scalar.value < 0x7F && scalar != "\"" && scalar != "\\"
            out.unicodeScalars.append(isPrintableASCII ? scalar : "?")
            count += 1
        }
        return "\"" + out + "\""
    }
}
