import Foundation

/// The client data the browser collected and the authenticator signed over (WebAuthn L3 §5.8.1).
///
/// Unknown members (`tokenBinding`, old `clientExtensions`, future additions) are ignored, as the
/// spec requires of relying parties.
public struct CollectedClientData: Codable, Equatable, Sendable {
    /// Largest clientDataJSON accepted. Real values are a few hundred bytes.
    public static let maxSize = 4096

    /// "webauthn.create" or "webauthn.get".
    public var type: String
    /// The ceremony's challenge, base64url without padding.
    public var challenge: String
    /// The caller's origin, e.g. "https://example.com".
    public var origin: String
    public var crossOrigin: Bool?
    /// The top-level origin when called from a cross-origin iframe.
    public var topOrigin: String?

    public init(type: String, challenge: String, origin: String, crossOrigin: Bool? = nil, topOrigin: String? = nil) {
        self.type = type
        self.challenge = challenge
        self.origin = origin
        self.crossOrigin = crossOrigin
        self.topOrigin = topOrigin
    }

    /// Parses raw clientDataJSON bytes: `tooLarge` beyond `maxSize`, `malformedClientData` for
    /// anything that is not a JSON object with string `type`, `challenge` and `origin`.
    public init(json: Data) throws {
        guard json.count <= Self.maxSize else {
            throw WebAuthnError(.tooLarge, "clientDataJSON is \(json.count) bytes; the limit is \(Self.maxSize)")
        }
        do {
            self = try JSONDecoder().decode(CollectedClientData.self, from: json)
        } catch {
            // DecodingError descriptions can quote input; name only the failing field.
            throw WebAuthnError(.malformedClientData, "clientDataJSON is not valid: \(Self.summary(of: error))")
        }
    }

    /// Serialises the way browsers do (§5.8.1.2): fixed member order, `crossOrigin` always
    /// present. For a software authenticator producing clientDataJSON.
    public func jsonData() -> Data {
        var json =
            "{\"type\":" + Self.jsonString(type)
            + ",\"challenge\":" + Self.jsonString(challenge)
            + ",\"origin\":" + Self.jsonString(origin)
            + ",\"crossOrigin\":" + ((crossOrigin ?? false) ? "true" : "false")
        if let topOrigin {
            json += ",\"topOrigin\":" + Self.jsonString(topOrigin)
        }
        json += "}"
        return Data(json.utf8)
    }

    private static func jsonString(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func summary(of error: Error) -> String {
        guard let error = error as? DecodingError else { return "not JSON" }
        switch error {
        case .keyNotFound(let key, _): return "missing member \(WebAuthnError.quote(key.stringValue))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            guard !context.codingPath.isEmpty else { return "not a JSON object" }
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "member \(WebAuthnError.quote(path)) has the wrong type"
        case .dataCorrupted: return "not a JSON object"
        @unknown default: return "not JSON"
        }
    }
}
