@_exported import Crypto
import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthentication
import Security

/// The Secure Enclave, played by laenclaved: keys are generated there and their private halves
/// never leave it in clear. A key's `dataRepresentation` is sealed by the daemon (AES-GCM under a
/// key of its own, which the daemon keeps in its record of the key; bound to the user and the app):
/// only this daemon, for this user and app, can use it, and only while the record exists (our
/// choice: a key held by a deleted keychain item or right, or a `…WhenPasscodeSet…` key after the
/// passcode's removal, throws `invalidKey` from every copy).
///
/// Our choices: authentication failures throw `LAError` (`userCancel`, `authenticationFailed`…);
/// a `.biometryCurrentSet` key after an enrolment change throws `SecureEnclaveKeyError.keyInvalidated`;
/// `compactRepresentable` is accepted and not enforced.
public enum SecureEnclave {
    /// Whether laenclaved can be reached (user mode: started on demand).
    public static var isAvailable: Bool { (try? EnclaveConnections.shared(for: .resolve())) != nil }

    /// Our own (Apple's Secure Enclave has no such call): this daemon's attestation root, the DER
    /// certificate an administrator hands to servers so they can check the chains of
    /// `attestationCertificates()` (`lactl attestation-root` prints it in PEM).
    public static func attestationRoot() throws -> Data {
        guard
            let root = try EnclaveKey.run(
                KeyRequest(operation: .attestationRoot, kind: .signing, context: ""),
                context: nil
            ).certificates?.first
        else {
            throw SecureEnclaveKeyError.unavailable("the daemon returned no attestation root")
        }
        return root
    }
}

public enum SecureEnclaveKeyError: Error, Equatable, CustomStringConvertible {
    /// Not a key of this daemon, user and app, deleted, or damaged.
    case invalidKey(String)
    /// Made with `.biometryCurrentSet` and the enrolment changed since (or its passcode was
    /// removed): it can never be used again. Discard it and make a new one.
    case keyInvalidated(String)
    case invalidParameter(String)
    case unavailable(String)

    public var description: String {
        switch self {
        case .invalidKey(let m), .keyInvalidated(let m), .invalidParameter(let m), .unavailable(let m): return m
        }
    }
}

enum EnclaveKey {

    static func run(_ request: KeyRequest, context: LAContext?) throws -> KeyReply {
        let reply = ContextRequests.performKeyOperation(request, context: context)
        guard let problem = reply.problem else { return reply }
        let message = reply.message ?? problem.rawValue
        switch problem {
        case .authentication:
            throw LAError(
                LAError.Code(rawValue: reply.authenticationError?.rawValue ?? -1) ?? .authenticationFailed,
                userInfo: [NSLocalizedDescriptionKey: message]
            )
        case .invalidated: throw SecureEnclaveKeyError.keyInvalidated(message)
        case .invalidKey: throw SecureEnclaveKeyError.invalidKey(message)
        case .invalidParameter: throw SecureEnclaveKeyError.invalidParameter(message)
        case .notAvailable: throw SecureEnclaveKeyError.unavailable(message)
        }
    }

    static func create(
        _ kind: KeyRequest.Kind,
        _ accessControl: SecAccessControl,
        _ context: LAContext?
    ) throws -> (Data, Data) {
        let reply = try run(
            KeyRequest(
                operation: .create,
                kind: kind,
                accessControl: accessControl.wireValue,
                context: ""
            ),
            context: context
        )
        guard let blob = reply.blob, let publicKey = reply.publicKey else {
            throw SecureEnclaveKeyError.unavailable("the daemon returned no key")
        }
        return (blob, publicKey)
    }

    static func open(_ kind: KeyRequest.Kind, _ blob: Data, _ context: LAContext?) throws -> Data {
        guard
            let publicKey = try run(KeyRequest(operation: .open, kind: kind, blob: blob, context: ""), context: context)
                .publicKey
        else {
            throw SecureEnclaveKeyError.unavailable("the daemon returned no public key")
        }
        return publicKey
    }

    static func digestBytes<D: Digest>(_ digest: D) throws -> Data {
        let bytes = digest.withUnsafeBytes { Data($0) }
        guard bytes.count == 32 else {
            throw SecureEnclaveKeyError.invalidParameter("Secure Enclave P-256 keys sign SHA-256 digests (32 bytes)")
        }
        return bytes
    }
}

extension SecureEnclave {
    public enum P256 {
        public enum Signing {
            public struct PrivateKey: Sendable {
                public let dataRepresentation: Data
                public let publicKey: Crypto.P256.Signing.PublicKey
                private let context: LAContext?

                public init(
                    compactRepresentable: Bool = true,
                    accessControl: SecAccessControl = SecAccessControlCreateWithFlags(
                        nil,
                        kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                        [],
                        nil
                    )!,
                    authenticationContext: LAContext? = nil
                ) throws {
                    let (blob, publicKey) = try EnclaveKey.create(.signing, accessControl, authenticationContext)
                    dataRepresentation = blob
                    self.publicKey = try Crypto.P256.Signing.PublicKey(x963Representation: publicKey)
                    context = authenticationContext
                }

                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {
                    publicKey = try Crypto.P256.Signing.PublicKey(
                        x963Representation: try EnclaveKey.open(.signing, dataRepresentation, authenticationContext)
                    )
                    self.dataRepresentation = dataRepresentation
                    context = authenticationContext
                }

                /// ECDSA with SHA-256 over `data`; asks for the owner as the key's access control demands.
                public func signature<D: DataProtocol>(for data: D) throws -> Crypto.P256.Signing.ECDSASignature {
                    try signature(for: SHA256.hash(data: data))
                }

                /// Our own (Apple attests Secure Enclave keys only through App Attest): the key's
                /// certificate chain, DER, leaf first — a certificate of this public key by the
                /// daemon's attestation key, stating the key's access control and protection and the
                /// daemon's mode and sensor (`KeyAttestation.KeyDescription`), then the attestation
                /// key's certificate, issued by the root `SecureEnclave.attestationRoot()` answers.
                /// Asks for no one; throws `keyInvalidated` for a key that can no longer be used.
                public func attestationCertificates() throws -> [Data] {
                    guard
                        let chain = try EnclaveKey.run(
                            KeyRequest(operation: .attest, kind: .signing, blob: dataRepresentation, context: ""),
                            context: context
                        ).certificates, !chain.isEmpty
                    else {
                        throw SecureEnclaveKeyError.unavailable("the daemon returned no certificates")
                    }
                    return chain
                }

                public func signature<D: Digest>(for digest: D) throws -> Crypto.P256.Signing.ECDSASignature {
                    let reply = try EnclaveKey.run(
                        KeyRequest(
                            operation: .sign,
                            kind: .signing,
                            blob: dataRepresentation,
                            digest: try EnclaveKey.digestBytes(digest),
                            context: ""
                        ),
                        context: context
                    )
                    guard let raw = reply.signature else {
                        throw SecureEnclaveKeyError.unavailable("the daemon returned no signature")
                    }
                    return try Crypto.P256.Signing.ECDSASignature(rawRepresentation: raw)
                }
            }
        }

        public enum KeyAgreement {
            public struct PrivateKey: Sendable {
                public let dataRepresentation: Data
                public let publicKey: Crypto.P256.KeyAgreement.PublicKey
                private let context: LAContext?

                public init(
                    compactRepresentable: Bool = true,
                    accessControl: SecAccessControl = SecAccessControlCreateWithFlags(
                        nil,
                        kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                        [],
                        nil
                    )!,
                    authenticationContext: LAContext? = nil
                ) throws {
                    let (blob, publicKey) = try EnclaveKey.create(.keyAgreement, accessControl, authenticationContext)
                    dataRepresentation = blob
                    self.publicKey = try Crypto.P256.KeyAgreement.PublicKey(x963Representation: publicKey)
                    context = authenticationContext
                }

                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {
                    publicKey = try Crypto.P256.KeyAgreement.PublicKey(
                        x963Representation: try EnclaveKey.open(
                            .keyAgreement,
                            dataRepresentation,
                            authenticationContext
                        )
                    )
                    self.dataRepresentation = dataRepresentation
                    context = authenticationContext
                }

                /// ECDH in the daemon. swift-crypto's `SharedSecret` has no public initializer, so the
                /// daemon's answer (the x-coordinate of the shared point) becomes one through
                /// swift-crypto itself: the point (x, y) times the public scalar 1 has that x.
                public func sharedSecretFromKeyAgreement(
                    with publicKeyShare: Crypto.P256.KeyAgreement.PublicKey
                ) throws -> SharedSecret {
                    let reply = try EnclaveKey.run(
                        KeyRequest(
                            operation: .agree,
                            kind: .keyAgreement,
                            blob: dataRepresentation,
                            peerPublicKey: publicKeyShare.x963Representation,
                            context: ""
                        ),
                        context: context
                    )
                    guard let x = reply.sharedSecret, x.count == 32 else {
                        throw SecureEnclaveKeyError.unavailable("the daemon returned no shared secret")
                    }
                    let point = try Crypto.P256.KeyAgreement.PublicKey(compressedRepresentation: Data([0x02]) + x)
                    let one = try Crypto.P256.KeyAgreement.PrivateKey(
                        rawRepresentation: Data(repeating: 0, count: 31) + Data([1])
                    )
                    return try one.sharedSecretFromKeyAgreement(with: point)
                }
            }
        }
    }
}
