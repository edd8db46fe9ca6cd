import Foundation
import WebAuthn

// The HTTP API's JSON bodies, shared by touchlogin-server and the touchlogin client (the OpenAPI
// description in TouchLoginServer/OpenAPIDocument.swift names the same shapes).

public struct CreateAccountRequest: Codable, Sendable {
    public var username: String
    public var password: String
    public init(username: String, password: String) { self.username = username; self.password = password }
}

public struct PasswordLoginRequest: Codable, Sendable {
    public var username: String
    public var password: String
    public init(username: String, password: String) { self.username = username; self.password = password }
}

/// The account's password, typed again into a live session (a step-up before changing devices).
public struct PasswordConfirmationRequest: Codable, Sendable {
    public var password: String
    public init(password: String) { self.password = password }
}

/// A signed-in session: send `token` as `Authorization: Bearer <token>`.
public struct SessionResponse: Codable, Sendable {
    public var token: String
    public var username: String
    /// Seconds since 1970.
    public var expiresAt: Double
    /// "password" or "passkey".
    public var method: String
    public init(token: String, username: String, expiresAt: Double, method: String) {
        self.token = token; self.username = username; self.expiresAt = expiresAt; self.method = method
    }
}

public struct AccountResponse: Codable, Sendable {
    public var username: String
    public var createdAt: Double
    public var devices: [DeviceResponse]
    public init(username: String, createdAt: Double, devices: [DeviceResponse]) {
        self.username = username; self.createdAt = createdAt; self.devices = devices
    }
}

public struct DeviceResponse: Codable, Sendable, Equatable {
    /// The credential ID, base64url.
    public var id: String
    public var name: String
    public var createdAt: Double
    public var lastUsedAt: Double?
    public var signCount: UInt32
    public var attestationFormat: String
    public init(id: String, name: String, createdAt: Double, lastUsedAt: Double?, signCount: UInt32, attestationFormat: String) {
        self.id = id; self.name = name; self.createdAt = createdAt; self.lastUsedAt = lastUsedAt
        self.signCount = signCount; self.attestationFormat = attestationFormat
    }
}

public struct RegistrationOptionsRequest: Codable, Sendable {
    public var deviceName: String?
    public init(deviceName: String? = nil) { self.deviceName = deviceName }
}

/// `publicKey` goes to `navigator.credentials.create` (after `parseCreationOptionsFromJSON`).
public struct RegistrationOptionsResponse: Codable, Sendable {
    public var publicKey: PublicKeyCredentialCreationOptionsJSON
    public init(publicKey: PublicKeyCredentialCreationOptionsJSON) { self.publicKey = publicKey }
}

public struct RegistrationRequest: Codable, Sendable {
    public var deviceName: String?
    public var credential: RegistrationResponseJSON
    public init(deviceName: String?, credential: RegistrationResponseJSON) { self.deviceName = deviceName; self.credential = credential }
}

public struct AssertionOptionsRequest: Codable, Sendable {
    /// With a username the options list that account's credentials; without, any discoverable one.
    public var username: String?
    public init(username: String? = nil) { self.username = username }
}

public struct AssertionOptionsResponse: Codable, Sendable {
    public var publicKey: PublicKeyCredentialRequestOptionsJSON
    public init(publicKey: PublicKeyCredentialRequestOptionsJSON) { self.publicKey = publicKey }
}

public struct AssertionRequest: Codable, Sendable {
    public var credential: AuthenticationResponseJSON
    public init(credential: AuthenticationResponseJSON) { self.credential = credential }
}

public struct HealthResponse: Codable, Sendable {
    public var status: String
    public var storage: String
    public init(status: String, storage: String) { self.status = status; self.storage = storage }
}
