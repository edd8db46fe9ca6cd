import Foundation
import WebAuthn

// The HTTP API's JSON bodies, shared by touchlogin-server and the touchlogin client (the OpenAPI
// description in TouchLoginServer/OpenAPIDocument.swift names the same shapes).

public struct CreateAccountRequest: Codable, Sendable {
    public var username: String
    public var password: String
    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
}

public struct PasswordLoginRequest: Codable, Sendable {
    public var username: String
    public var password: String
    /// The `SessionResponse.clientToken` this client was given at its last password login for
    /// this username, if any: its attempts are then judged on its own budget, not on the waits
    /// and lock that others' wrong guesses put on the username.
    public var clientToken: String?
    public init(username: String, password: String, clientToken: String? = nil) {
        self.username = username
        self.password = password
        self.clientToken = clientToken
    }
}

/// The account's password, typed again into a live session (a step-up before changing devices).
public struct PasswordConfirmationRequest: Codable, Sendable {
    public var password: String
    public init(password: String) { self.password = password }
}

/// A new password: with the current one, or in a session where it was typed in the last minutes.
public struct PasswordChangeRequest: Codable, Sendable {
    public var currentPassword: String?
    public var newPassword: String
    public init(currentPassword: String?, newPassword: String) {
        self.currentPassword = currentPassword
        self.newPassword = newPassword
    }
}

/// A signed-in session: send `token` as `Authorization: Bearer <token>`.
public struct SessionResponse: Codable, Sendable {
    public var token: String
    public var username: String
    /// Seconds since 1970.
    public var expiresAt: Double
    /// "password" or "passkey".
    public var method: String
    /// At a passkey login: the devices added to the account since this device last logged in
    /// (a device its owner did not add means someone else has the account).
    public var newDevices: [DeviceResponse]?
    /// At a password login or sign-up: a token naming this client for this username, to keep
    /// (like a password manager keeps the password) and send with later password logins
    /// (`PasswordLoginRequest.clientToken`).
    public var clientToken: String?
    public init(
        token: String,
        username: String,
        expiresAt: Double,
        method: String,
        newDevices: [DeviceResponse]? = nil,
        clientToken: String? = nil
    ) {
        self.token = token
        self.username = username
        self.expiresAt = expiresAt
        self.method = method
        self.newDevices = newDevices
        self.clientToken = clientToken
    }
}

public struct AccountResponse: Codable, Sendable {
    public var username: String
    public var createdAt: Double
    public var devices: [DeviceResponse]
    /// The newest sign-ins and device changes, newest first (kept 90 days).
    public var activity: [ActivityResponse]?
    public init(username: String, createdAt: Double, devices: [DeviceResponse], activity: [ActivityResponse]? = nil) {
        self.username = username
        self.createdAt = createdAt
        self.devices = devices
        self.activity = activity
    }
}

/// One thing that happened to the account: when, what, with which device, from which address.
public struct ActivityResponse: Codable, Sendable, Equatable {
    public var at: Double
    /// "sign-up", "password-login", "passkey-login", "device-added", "device-revoked" or "password-changed".
    public var kind: String
    public var deviceID: String?
    public var deviceName: String?
    public var address: String
    public init(at: Double, kind: String, deviceID: String?, deviceName: String?, address: String) {
        self.at = at
        self.kind = kind
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.address = address
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
    /// The authenticator model's AAGUID (all zeros when it does not say).
    public var aaguid: String?
    public var transports: [String]?
    /// BE: the credential may be synced to other devices (a passkey in a password manager).
    public var backupEligible: Bool?
    /// BS: it is backed up now (as of the last login).
    public var backedUp: Bool?
    /// The authenticator verified the user when the credential was made (uvInitialized).
    public var userVerified: Bool?
    /// What a trusted attestation stated of the key ("system daemon, fprintd, biometryCurrentSet,
    /// privateKeyUsage (akpu)"); absent when no root the server trusts vouched for it.
    public var attestedKey: String?
    public init(
        id: String,
        name: String,
        createdAt: Double,
        lastUsedAt: Double?,
        signCount: UInt32,
        attestationFormat: String
    ) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.signCount = signCount
        self.attestationFormat = attestationFormat
    }
}

public struct RenameDeviceRequest: Codable, Sendable {
    public var name: String
    public init(name: String) { self.name = name }
}

/// What a registration binds: a device key (`touchlogin`'s laenclaved key, which the server can
/// ask to be attested) or a passkey (a browser's or a security key's; the default).
public enum CredentialKind: String, Codable, Sendable {
    case deviceKey = "device-key"
    case passkey
}

extension CredentialKind {
    /// What a device key (`touchlogin`'s, in laenclaved) registers: an ID of this many random
    /// bytes and these transports. The server's decoys take the same shape.
    public static let deviceKeyIDBytes = 32
    public static let deviceKeyTransports = ["internal"]
}

public struct RegistrationOptionsRequest: Codable, Sendable {
    public var deviceName: String?
    public var kind: CredentialKind?
    public init(deviceName: String? = nil, kind: CredentialKind? = nil) {
        self.deviceName = deviceName
        self.kind = kind
    }
}

/// `publicKey` goes to `navigator.credentials.create` (after `parseCreationOptionsFromJSON`).
public struct RegistrationOptionsResponse: Codable, Sendable {
    public var publicKey: PublicKeyCredentialCreationOptionsJSON
    public init(publicKey: PublicKeyCredentialCreationOptionsJSON) { self.publicKey = publicKey }
}

public struct RegistrationRequest: Codable, Sendable {
    public var deviceName: String?
    public var kind: CredentialKind?
    public var credential: RegistrationResponseJSON
    /// Our own: with a `tpm` attestation (which says where the key is, not how it is guarded), the
    /// laenclaved certificate chain of the same key (base64url DER, leaf first), whose statement
    /// says how; `--require-attestation` checks it as it checks a `packed` one's.
    public var keyCertificates: [String]?
    public init(
        deviceName: String?,
        kind: CredentialKind? = nil,
        credential: RegistrationResponseJSON,
        keyCertificates: [String]? = nil
    ) {
        self.deviceName = deviceName
        self.kind = kind
        self.credential = credential
        self.keyCertificates = keyCertificates
    }
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
    public init(status: String, storage: String) {
        self.status = status
        self.storage = storage
    }
}
