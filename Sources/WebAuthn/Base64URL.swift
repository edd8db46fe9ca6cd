import Foundation

/// Base64url (RFC 4648 §5), the encoding WebAuthn uses for every binary value in JSON.
extension Data {
    /// Decodes base64url. Padding is optional, but if present it must be correct; any character
    /// outside the URL-safe alphabet (including `+`, `/`, whitespace) makes this return nil.
    public init?(base64URLEncoded string: String) {
        var body = Substring(string)
        var padding = 0
        while body.last == "=" {
            body.removeLast()
            padding += 1
        }
        if padding > 0 {
            // Padded input must be complete quanta with exactly the padding the length implies.
            guard padding <= 2, string.utf8.count % 4 == 0 else { return nil }
        }
        var standard = [UInt8]()
        standard.reserveCapacity(body.utf8.count + 3)
        for byte in body.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                standard.append(byte)
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            default: return nil
            }
        }
        // A single leftover character cannot encode a whole byte.
        guard standard.count % 4 != 1 else { return nil }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        guard let decoded = Data(base64Encoded: Data(standard)) else { return nil }
        self = decoded
    }

    /// Encodes as base64url without padding, as browsers and the WebAuthn JSON forms do.
    public func base64URLEncodedString() -> String {
        var encoded = base64EncodedString()
        while encoded.last == "=" { encoded.removeLast() }
        return String(
            encoded.map { character -> Character in
                switch character {
                case "+": return "-"
                case "/": return "_"
                default: return character
                }
            }
        )
    }
}
