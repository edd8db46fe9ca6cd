import CryptoKit
import Foundation
import KeyAttestation
import LocalAuthentication
import Security
import TouchLoginAPI
import WebAuthn

/// A platform authenticator backed by laenclaved: the credential is a Secure Enclave P-256 key
/// made with `.biometryCurrentSet` and `.privateKeyUsage`, so every signature needs the enrolled
/// fingers of the day it was made. It produces WebAuthn's shapes, so the server treats it like
/// any passkey. One `LAContext` evaluation covers a whole operation (no second prompt).
public struct EnclaveAuthenticator: Sendable {
    /// The origin written into clientDataJSON (the server's URL, as a browser would).
    public let origin: String

    public init(origin: String) { self.origin = origin }

    public struct Registration {
        public var request: RegistrationRequest
        public var binding: ClientState.Binding
    }

    /// Makes a new key and answers the server's creation options with a packed attestation signed
    /// by the new key (the prompt): self attestation, or — when the server asks for it
    /// (`attestation: "direct"`) — with the key's certificate chain from laenclaved, which tells
    /// the server the daemon holds the key and how it is protected. With `attestationKeyCertificate`
    /// (the server's aikCert for this machine's TPM: `attestationKeyCertificate(api:token:)`), a
    /// `tpm` attestation instead: the TPM's certify statement of the new key, with the laenclaved
    /// chain beside it in the request (`keyCertificates`).
    public func register(
        options o: PublicKeyCredentialCreationOptionsJSON,
        deviceName: String,
        context: LAContext,
        attestationKeyCertificate: Data? = nil
    ) throws -> Registration {
        // -7: ES256
        guard o.pubKeyCredParams.contains(where: { $0.alg == -7 }) else {
            throw ClientError(.serverUnsupported, "The server does not accept ES256 keys.")
        }
        let rpID = o.rp.id ?? URL(string: origin)?.host ?? "localhost"
        guard
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                [.privateKeyUsage, .biometryCurrentSet],
                nil
            )
        else {
            throw ClientError(.accessControl, "Cannot describe the key's access control.")
        }
        let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access, authenticationContext: context)
        let credentialID = Data((0..<CredentialKind.deviceKeyIDBytes).map { _ in UInt8.random(in: 0...255) })
        let clientData = CollectedClientData(
            type: "webauthn.create",
            challenge: o.challenge,
            origin: origin,
            crossOrigin: false
        ).jsonData()
        let certificates = o.attestation == "direct" ? try key.attestationCertificates() : []
        let authenticatorData = AuthenticatorData(
            rpID: rpID,
            flags: [.userPresent, .userVerified],
            signCount: 0,
            attestedCredential: .init(
                aaguid: certificates.isEmpty ? Data(count: 16) : LaenclavedAttestation.aaguid,
                credentialID: credentialID,
                publicKey: COSEKey(key.publicKey)
            )
        )
        let clientDataHash = Data(SHA256.hash(data: clientData))
        let attestation =
            if let attestationKeyCertificate, !certificates.isEmpty {
                try AttestationObject.makeTPMAttestationObject(
                    authenticatorData: authenticatorData,
                    clientDataHash: clientDataHash,
                    certificates: [attestationKeyCertificate],
                    certify: {
                        let made = try key.tpmCertification(qualifyingData: $0)
                        return (made.certifyInfo, made.signature, made.publicArea)
                    }
                )
            } else {
                try AttestationObject.makeAttestationObject(
                    authenticatorData: authenticatorData,
                    format: .packed,
                    clientDataHash: clientDataHash,
                    certificates: certificates,
                    sign: { try key.signature(for: $0).derRepresentation }
                )
            }
        let tpm = attestationKeyCertificate != nil && !certificates.isEmpty
        let response = RegistrationResponseJSON(
            id: credentialID.base64URLEncodedString(),
            rawId: credentialID.base64URLEncodedString(),
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: clientData.base64URLEncodedString(),
                attestationObject: attestation.base64URLEncodedString(),
                transports: CredentialKind.deviceKeyTransports
            ),
            authenticatorAttachment: "platform"
        )
        return Registration(
            request: RegistrationRequest(
                deviceName: deviceName,
                kind: .deviceKey,
                credential: response,
                keyCertificates: tpm ? certificates.map { $0.base64URLEncodedString() } : nil
            ),
            binding: ClientState.Binding(
                credentialID: credentialID,
                keyBlob: key.dataRepresentation,
                domainState: context.domainState.biometry.stateHash,
                signCount: 0
            )
        )
    }

    /// Answers the server's request options with an assertion by the bound key.
    public func assert(
        options o: PublicKeyCredentialRequestOptionsJSON,
        binding: ClientState.Binding,
        context: LAContext
    ) throws -> (AssertionRequest, UInt32) {
        if let allowed = o.allowCredentials, !allowed.isEmpty,
            !allowed.contains(where: { Data(base64URLEncoded: $0.id) == binding.credentialID })
        {
            throw ClientError(.deviceRevoked)
        }
        let key = try SecureEnclave.P256.Signing.PrivateKey(
            dataRepresentation: binding.keyBlob,
            authenticationContext: context
        )
        let rpID = o.rpId ?? URL(string: origin)?.host ?? "localhost"
        let counter = binding.signCount &+ 1
        let clientData = CollectedClientData(
            type: "webauthn.get",
            challenge: o.challenge,
            origin: origin,
            crossOrigin: false
        ).jsonData()
        let authenticatorData = AuthenticatorData(rpID: rpID, flags: [.userPresent, .userVerified], signCount: counter)
        let signature = try key.signature(for: authenticatorData.raw + Data(SHA256.hash(data: clientData)))
        let id = binding.credentialID.base64URLEncodedString()
        let response = AuthenticationResponseJSON(
            id: id,
            rawId: id,
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: clientData.base64URLEncodedString(),
                authenticatorData: authenticatorData.raw.base64URLEncodedString(),
                signature: signature.derRepresentation.base64URLEncodedString()
            ),
            authenticatorAttachment: "platform"
        )
        return (AssertionRequest(credential: response), counter)
    }
}
