import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// A SHA-256 digest the client computed, for signing without the message (frames stay small).
struct PrehashedSHA256: Digest {
    static let byteCount = 32
    let bytes: [UInt8]
    init?(_ data: Data) {
        guard data.count == Self.byteCount else { return nil }
        bytes = Array(data)
    }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }
    func makeIterator() -> Array<UInt8>.Iterator { bytes.makeIterator() }
    var description: String { "SHA256 digest" }
}

/// What a key blob holds, sealed: the private key never leaves the daemon in clear.
private struct SealedKey: Codable {
    var kind: KeyRequest.Kind
    var privateKey: Data
    var protection: String
    var flags: UInt64
    var enrolmentGeneration: UInt64
    var passcodeEpoch: UInt64
}

extension UserSession {
    private static let blobMagic = Data("LAK1".utf8)

    /// The blob is bound to this user and app: another app (or user, or daemon) cannot open it.
    private func blobIdentity(app: String) -> Data { Data("secure-enclave-key\u{1F}\(uid)\u{1F}\(app)".utf8) }

    private func seal(_ key: SealedKey, app: String) throws -> Data {
        let payload = try JSONEncoder().encode(key)
        return Self.blobMagic + (try AES.GCM.seal(payload, using: userKey, authenticating: blobIdentity(app: app)).combined!)
    }

    private func unseal(_ blob: Data?, kind: KeyRequest.Kind, app: String) throws -> SealedKey {
        guard let blob, blob.count > Self.blobMagic.count, blob.prefix(Self.blobMagic.count) == Self.blobMagic,
              let box = try? AES.GCM.SealedBox(combined: blob.dropFirst(Self.blobMagic.count)),
              let payload = try? AES.GCM.open(box, using: userKey, authenticating: blobIdentity(app: app)),
              let key = try? JSONDecoder().decode(SealedKey.self, from: payload), key.kind == kind
        else { throw KeyReplyError(KeyReply(problem: .invalidKey, message: "not a \(kind.rawValue) key of this user and app, or damaged")) }
        return key
    }

    func keyOperation(_ r: KeyRequest, app: String, authorize: KeychainAuthorizer) async -> KeyReply {
        do {
            switch r.operation {
            case .create: return try await createKey(r, app: app)
            case .open:
                let key = try unseal(r.blob, kind: r.kind, app: app)
                return KeyReply(publicKey: try Self.publicKey(of: key))
            case .verify:
                let key = try unseal(r.blob, kind: .signing, app: app)
                guard let digest = Self.digest(of: r), let der = r.signature else {
                    throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "verify needs a 32-byte digest and a DER signature"))
                }
                let publicKey = try P256.Signing.PrivateKey(rawRepresentation: key.privateKey).publicKey
                let valid = (try? P256.Signing.ECDSASignature(derRepresentation: der)).map { publicKey.isValidSignature($0, for: digest) } ?? false
                return KeyReply(valid: valid)
            case .sign, .agree:
                let key = try unseal(r.blob, kind: r.kind, app: app)
                try await authorizeUse(key, r, authorize: authorize)
                return try use(key, r)
            }
        } catch let e as KeyReplyError {
            return e.reply
        } catch {
            logger.error("key operation failed", metadata: ["uid": "\(uid)", "error": "\(error)"])
            return KeyReply(problem: .notAvailable, message: "the key operation could not complete")
        }
    }

    private func createKey(_ r: KeyRequest, app: String) async throws -> KeyReply {
        let ac = r.accessControl ?? AccessControlValue(protection: Protection.afterFirstUnlockThisDeviceOnly.rawValue, flags: 0)
        guard let protection = Protection(rawValue: ac.protection) else { throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "unknown protection \"\(ac.protection.prefix(16))\"")) }
        let requirement: AccessRequirement
        do { requirement = try AccessRequirement(flags: ac.flags) } catch { throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "\(error)")) }
        if requirement.applicationPassword { throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "applicationPassword is not supported for Secure Enclave keys")) }
        if protection == .whenPasscodeSetThisDeviceOnly && !passcodeIsSet {
            throw KeyReplyError(KeyReply(problem: .notAvailable, message: "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly needs a device passcode"))
        }
        let enrolled = try await identities()
        if requirement.currentSet && enrolled.isEmpty {
            throw KeyReplyError(KeyReply(problem: .notAvailable, message: "biometryCurrentSet needs at least one enrolled identity"))
        }
        let raw: Data = r.kind == .signing ? P256.Signing.PrivateKey().rawRepresentation : P256.KeyAgreement.PrivateKey().rawRepresentation
        let key = SealedKey(kind: r.kind, privateKey: raw, protection: protection.rawValue, flags: ac.flags,
                            enrolmentGeneration: record.enrolmentGeneration, passcodeEpoch: record.passcodeEpoch)
        return KeyReply(blob: try seal(key, app: app), publicKey: try Self.publicKey(of: key))
    }

    /// The digest to sign or verify: given, or SHA-256 of the given message.
    private static func digest(of r: KeyRequest) -> PrehashedSHA256? {
        if let d = r.digest { return PrehashedSHA256(d) }
        if let m = r.message { return PrehashedSHA256(Data(SHA256.hash(data: m))) }
        return nil
    }

    private static func publicKey(of key: SealedKey) throws -> Data {
        switch key.kind {
        case .signing: return try P256.Signing.PrivateKey(rawRepresentation: key.privateKey).publicKey.x963Representation
        case .keyAgreement: return try P256.KeyAgreement.PrivateKey(rawRepresentation: key.privateKey).publicKey.x963Representation
        }
    }

    private func authorizeUse(_ key: SealedKey, _ r: KeyRequest, authorize: KeychainAuthorizer) async throws {
        let requirement = try AccessRequirement(flags: key.flags)
        let invalidated = KeyReplyError(KeyReply(problem: .invalidated, message: "the key was made with biometryCurrentSet and the enrolled identities have changed since; it can never be used again"))
        if key.protection == Protection.whenPasscodeSetThisDeviceOnly.rawValue && (!passcodeIsSet || key.passcodeEpoch != record.passcodeEpoch) {
            throw KeyReplyError(KeyReply(problem: .invalidated, message: "the key needed a device passcode, which was removed; it can never be used again"))
        }
        // The enrolment is read fresh before and checked again after the prompt (other requests
        // run while it is open).
        _ = try await identities()
        guard let steps = requirement.steps(madeAt: key.enrolmentGeneration, enrolmentNow: record.enrolmentGeneration) else { throw invalidated }
        for step in steps {
            let outcome = await authorize(step, r.reason ?? "Use a Secure Enclave key", r.interactionNotAllowed)
            if case .failure(let code, let message) = outcome {
                throw KeyReplyError(KeyReply(problem: .authentication, message: message, authenticationError: code))
            }
        }
        _ = try await identities()
        if requirement.steps(madeAt: key.enrolmentGeneration, enrolmentNow: record.enrolmentGeneration) == nil { throw invalidated }
    }

    private func use(_ key: SealedKey, _ r: KeyRequest) throws -> KeyReply {
        switch r.operation {
        case .sign:
            guard let digest = Self.digest(of: r) else { throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "sign needs a 32-byte SHA-256 digest or a message")) }
            let signature = try P256.Signing.PrivateKey(rawRepresentation: key.privateKey).signature(for: digest)
            return KeyReply(signature: signature.rawRepresentation, signatureDER: signature.derRepresentation)
        case .agree:
            guard let peerBytes = r.peerPublicKey, let peer = try? P256.KeyAgreement.PublicKey(x963Representation: peerBytes) else {
                throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "agree needs the peer's P-256 public key (X9.63)"))
            }
            let secret = try P256.KeyAgreement.PrivateKey(rawRepresentation: key.privateKey).sharedSecretFromKeyAgreement(with: peer)
            return KeyReply(sharedSecret: secret.withUnsafeBytes { Data($0) })
        default:
            throw KeyReplyError(KeyReply(problem: .invalidParameter, message: "not a use of a key"))
        }
    }
}

struct KeyReplyError: Error {
    var reply: KeyReply
    init(_ reply: KeyReply) { self.reply = reply }
}
