import Foundation

// The WebAuthn L3 JSON forms (§5.1.8 toJSON(), §5.1.9 parseCreationOptionsFromJSON,
// §5.1.10 parseRequestOptionsFromJSON). Binary values travel as base64url strings; the member
// names match the spec exactly so these encode and decode what browsers use. Optional members
// left nil are omitted when encoding.

// MARK: - Shared pieces

public struct PublicKeyCredentialRpEntity: Codable, Equatable, Sendable {
    public var id: String?
    public var name: String

    public init(id: String?, name: String) {
        self.id = id
        self.name = name
    }
}

public struct PublicKeyCredentialUserEntityJSON: Codable, Equatable, Sendable {
    /// The user handle, base64url: opaque, at most 64 bytes, no personal information.
    public var id: String
    public var name: String
    public var displayName: String

    public init(id: String, name: String, displayName: String) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }
}

public struct PublicKeyCredentialParameters: Codable, Equatable, Sendable {
    public var type: String
    public var alg: Int

    public init(type: String = "public-key", alg: Int) {
        self.type = type
        self.alg = alg
    }

    public static let es256 = PublicKeyCredentialParameters(alg: COSEKey.Algorithm.es256.rawValue)
    public static let edDSA = PublicKeyCredentialParameters(alg: COSEKey.Algorithm.edDSA.rawValue)
    public static let rs256 = PublicKeyCredentialParameters(alg: COSEKey.Algorithm.rs256.rawValue)
    /// Every algorithm this module verifies, in the order a relying party prefers them.
    public static let supported: [PublicKeyCredentialParameters] = COSEKey.Algorithm.allCases.map {
        PublicKeyCredentialParameters(alg: $0.rawValue)
    }
}

public struct PublicKeyCredentialDescriptorJSON: Codable, Equatable, Sendable {
    public var type: String
    /// The credential ID, base64url.
    public var id: String
    /// "usb", "nfc", "ble", "smart-card", "hybrid", "internal".
    public var transports: [String]?

    public init(type: String = "public-key", id: String, transports: [String]? = nil) {
        self.type = type
        self.id = id
        self.transports = transports
    }
}

public struct AuthenticatorSelectionCriteria: Codable, Equatable, Sendable {
    /// "platform" or "cross-platform".
    public var authenticatorAttachment: String?
    /// "discouraged", "preferred" or "required".
    public var residentKey: String?
    public var requireResidentKey: Bool?
    /// "discouraged", "preferred" or "required".
    public var userVerification: String?

    public init(
        authenticatorAttachment: String? = nil,
        residentKey: String? = nil,
        requireResidentKey: Bool? = nil,
        userVerification: String? = nil
    ) {
        self.authenticatorAttachment = authenticatorAttachment
        self.residentKey = residentKey
        self.requireResidentKey = requireResidentKey
        self.userVerification = userVerification
    }
}

/// Client extension outputs. This module uses none, so any JSON object is accepted and its
/// contents dropped; it encodes as `{}`.
public struct AuthenticationExtensionsClientOutputsJSON: Codable, Equatable, Sendable {
    public init() {}

    public init(from decoder: Decoder) throws {
        // Insist on an object, but read nothing from it.
        _ = try decoder.container(keyedBy: AnyKey.self)
    }

    public func encode(to encoder: Encoder) throws {
        _ = encoder.container(keyedBy: AnyKey.self)
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

// MARK: - Options (server → browser)

public struct PublicKeyCredentialCreationOptionsJSON: Codable, Equatable, Sendable {
    public var rp: PublicKeyCredentialRpEntity
    public var user: PublicKeyCredentialUserEntityJSON
    /// base64url.
    public var challenge: String
    public var pubKeyCredParams: [PublicKeyCredentialParameters]
    /// Milliseconds.
    public var timeout: UInt32?
    public var excludeCredentials: [PublicKeyCredentialDescriptorJSON]?
    public var authenticatorSelection: AuthenticatorSelectionCriteria?
    /// "none", "indirect", "direct" or "enterprise".
    public var attestation: String?
    /// WebAuthn L3: the statement formats the relying party prefers, most preferred first
    /// ("tpm", "packed"); nil: no preference.
    public var attestationFormats: [String]?

    public init(
        rp: PublicKeyCredentialRpEntity,
        user: PublicKeyCredentialUserEntityJSON,
        challenge: String,
        pubKeyCredParams: [PublicKeyCredentialParameters] = PublicKeyCredentialParameters.supported,
        timeout: UInt32? = nil,
        excludeCredentials: [PublicKeyCredentialDescriptorJSON]? = nil,
        authenticatorSelection: AuthenticatorSelectionCriteria? = nil,
        attestation: String? = nil,
        attestationFormats: [String]? = nil
    ) {
        self.rp = rp
        self.user = user
        self.challenge = challenge
        self.pubKeyCredParams = pubKeyCredParams
        self.timeout = timeout
        self.excludeCredentials = excludeCredentials
        self.authenticatorSelection = authenticatorSelection
        self.attestation = attestation
        self.attestationFormats = attestationFormats
    }
}

public struct PublicKeyCredentialRequestOptionsJSON: Codable, Equatable, Sendable {
    /// base64url.
    public var challenge: String
    /// Milliseconds.
    public var timeout: UInt32?
    public var rpId: String?
    public var allowCredentials: [PublicKeyCredentialDescriptorJSON]?
    /// "discouraged", "preferred" or "required".
    public var userVerification: String?

    public init(
        challenge: String,
        timeout: UInt32? = nil,
        rpId: String? = nil,
        allowCredentials: [PublicKeyCredentialDescriptorJSON]? = nil,
        userVerification: String? = nil
    ) {
        self.challenge = challenge
        self.timeout = timeout
        self.rpId = rpId
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
    }
}

// MARK: - Responses (browser → server)

public struct AuthenticatorAttestationResponseJSON: Codable, Equatable, Sendable {
    /// base64url.
    public var clientDataJSON: String
    /// base64url.
    public var attestationObject: String
    public var transports: [String]?
    // Convenience copies browsers add in toJSON(); informational, never trusted over attestationObject.
    public var authenticatorData: String?
    public var publicKey: String?
    public var publicKeyAlgorithm: Int?

    public init(
        clientDataJSON: String,
        attestationObject: String,
        transports: [String]? = nil,
        authenticatorData: String? = nil,
        publicKey: String? = nil,
        publicKeyAlgorithm: Int? = nil
    ) {
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.transports = transports
        self.authenticatorData = authenticatorData
        self.publicKey = publicKey
        self.publicKeyAlgorithm = publicKeyAlgorithm
    }
}

public struct AuthenticatorAssertionResponseJSON: Codable, Equatable, Sendable {
    /// base64url.
    public var clientDataJSON: String
    /// base64url.
    public var authenticatorData: String
    /// base64url of the DER signature.
    public var signature: String
    /// base64url; present for discoverable credentials.
    public var userHandle: String?

    public init(clientDataJSON: String, authenticatorData: String, signature: String, userHandle: String? = nil) {
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
    }
}

/// What both kinds of authenticator response carry.
public protocol AuthenticatorResponseJSON: Codable, Equatable, Sendable {
    /// base64url.
    var clientDataJSON: String { get }
}

extension AuthenticatorAttestationResponseJSON: AuthenticatorResponseJSON {}
extension AuthenticatorAssertionResponseJSON: AuthenticatorResponseJSON {}

/// A `PublicKeyCredential` as `toJSON()` serialises it: the registration and the authentication
/// responses differ only in `response`.
public struct PublicKeyCredentialJSON<Response: AuthenticatorResponseJSON>: Codable, Equatable, Sendable {
    /// base64url of `rawId`.
    public var id: String
    /// base64url.
    public var rawId: String
    /// "public-key".
    public var type: String
    public var response: Response
    public var clientExtensionResults: AuthenticationExtensionsClientOutputsJSON
    public var authenticatorAttachment: String?

    public init(
        id: String,
        rawId: String,
        type: String = "public-key",
        response: Response,
        clientExtensionResults: AuthenticationExtensionsClientOutputsJSON = .init(),
        authenticatorAttachment: String? = nil
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.response = response
        self.clientExtensionResults = clientExtensionResults
        self.authenticatorAttachment = authenticatorAttachment
    }

    /// The credential ID. `malformedClientData` if not base64url or `type` is not "public-key";
    /// `credentialIDMismatch` if `id` and `rawId` differ.
    public var decodedRawID: Data {
        get throws { try JSONField.credentialID(id: id, rawId: rawId, type: type) }
    }

    /// `malformedClientData` if not base64url.
    public var decodedClientDataJSON: Data {
        get throws { try JSONField.decode(response.clientDataJSON, name: "clientDataJSON", code: .malformedClientData) }
    }
}

public typealias RegistrationResponseJSON = PublicKeyCredentialJSON<AuthenticatorAttestationResponseJSON>
public typealias AuthenticationResponseJSON = PublicKeyCredentialJSON<AuthenticatorAssertionResponseJSON>

extension PublicKeyCredentialJSON where Response == AuthenticatorAttestationResponseJSON {
    /// `malformedAttestation` if not base64url.
    public var decodedAttestationObject: Data {
        get throws {
            try JSONField.decode(response.attestationObject, name: "attestationObject", code: .malformedAttestation)
        }
    }
}

extension PublicKeyCredentialJSON where Response == AuthenticatorAssertionResponseJSON {
    /// `malformedAuthenticatorData` if not base64url.
    public var decodedAuthenticatorData: Data {
        get throws {
            try JSONField.decode(
                response.authenticatorData,
                name: "authenticatorData",
                code: .malformedAuthenticatorData
            )
        }
    }

    /// `signatureInvalid` if not base64url.
    public var decodedSignature: Data {
        get throws { try JSONField.decode(response.signature, name: "signature", code: .signatureInvalid) }
    }

    /// nil when absent; `malformedClientData` if not base64url.
    public var decodedUserHandle: Data? {
        get throws {
            guard let userHandle = response.userHandle else { return nil }
            return try JSONField.decode(userHandle, name: "userHandle", code: .malformedClientData)
        }
    }
}

/// Decoding of the base64url members, with the error code each member maps to.
enum JSONField {
    static func decode(_ value: String, name: String, code: WebAuthnError.Code) throws -> Data {
        guard let data = Data(base64URLEncoded: value) else {
            throw WebAuthnError(code, "\(name) is not valid base64url")
        }
        return data
    }

    static func credentialID(id: String, rawId: String, type: String) throws -> Data {
        guard type == "public-key" else {
            throw WebAuthnError(
                .malformedClientData,
                "credential type is \(WebAuthnError.quote(type)); expected \"public-key\""
            )
        }
        let raw = try decode(rawId, name: "rawId", code: .malformedClientData)
        let fromID = try decode(id, name: "id", code: .malformedClientData)
        guard raw == fromID else {
            throw WebAuthnError(.credentialIDMismatch, "id and rawId name different credentials")
        }
        return raw
    }
}
