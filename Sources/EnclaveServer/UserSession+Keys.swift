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
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }
    func makeIterator() -> Array<UInt8>.Iterator { bytes.makeIterator() }
    var description: String { "SHA256 digest" }
}

/// A signature or agreement between reading its key and performing it: the connection proves what
/// `proofs` asks on the request's context, then `keyFinish` performs it.
struct PendingKeyUse: Sendable {
    let request: KeyRequest
    let app: AppIdentity
    let key: KeyBlob
    let use: UserSession.KeyUse
    var proofs: AccessProofs<KeyBlob>
}

/// Where a key request stands after the user's session has read it.
enum KeyStart: Sendable {
    case answered(KeyReply)
    case proving(PendingKeyUse)
}

extension UserSession {
    /// The key owner of `app`: an interpreter has none (`AppIdentity`).
    func owner(_ app: AppIdentity) throws -> String {
        guard let own = app.ownGroup else {
            throw DaemonError(
                .keyNotAvailable,
                "\(app) runs other programs' code, so it has no Secure Enclave keys of its own"
            )
        }
        return own
    }

    /// The key in `blob`, if its record (or, for a blob from before records, its absence from the
    /// revoked ones) says it still exists, for this user and app.
    func unseal(_ blob: Data?, kind: KeyRequest.Kind, app: AppIdentity) throws -> KeyBlob {
        let owner = try owner(app)
        let opened: KeyBlob?
        switch try liveKey(blob, app: app) {
        case .legacy(let blob):
            opened = KeyBlob.openLegacy(blob, kind: kind, userKey: keys.legacy, uid: uid, app: owner)
        case .recorded(let blob, let key): opened = KeyBlob.open(blob, kind: kind, key: key, uid: uid, app: owner)
        }
        guard let opened else {
            throw DaemonError(.keyInvalid, "not a \(kind.rawValue) key of this user and app, or damaged")
        }
        return opened
    }

    private enum LiveKey {
        /// A blob from before key records, not revoked.
        case legacy(Data)
        /// A blob and the key its record holds.
        case recorded(Data, SymmetricKey)
    }

    private func liveKey(_ blob: Data?, app: AppIdentity) throws -> LiveKey {
        let owner = try owner(app)
        guard let blob, let handle = KeyBlob.handle(of: blob) else {
            throw DaemonError(.keyInvalid, "not a Secure Enclave key's data representation")
        }
        let deleted = DaemonError(
            .keyInvalid,
            "this Secure Enclave key was deleted (with its keychain item or its right), or was never this daemon's: make a new one"
        )
        if handle.isLegacy {
            if try storage.isRevoked(handle) { throw deleted }
            return .legacy(blob)
        }
        guard let record = try storage.keyRecord(handle) else { throw deleted }
        guard record.uid == uid, record.app == owner else {
            throw DaemonError(.keyInvalid, "not a key of this user and app")
        }
        if record.isDestroyed {
            throw DaemonError(
                .keyInvalidated,
                "this key was made …WhenPasscodeSetThisDeviceOnly and the passcode was removed: it can never be used again"
            )
        }
        guard
            let key = KeyHierarchy.unwrap(
                record.wrapped,
                under: try classKey(record.keyClass),
                context: KeyHierarchy.enclaveKeyContext(uid: uid, handle: handle.bytes)
            )
        else { throw DaemonError(.keyInvalid, "the key's record is damaged") }
        return .recorded(blob, key)
    }

    /// The handle of the key a new keychain item holds (`KeychainRequest.heldKey`): a live key of
    /// this user and app, else the add is refused.
    func heldKey(_ blob: Data, app: AppIdentity) throws -> KeyHandle {
        let live: LiveKey
        do {
            live = try liveKey(blob, app: app)
        } catch let e as DaemonError where [.keyInvalid, .keyInvalidated, .keyNotAvailable].contains(e.code) {
            throw KeychainFailure(.param, "the held key is not usable: \(e.message)")
        }
        if case .legacy = live, let owner = app.ownGroup,
            !KeyRequest.Kind.allCases.contains(where: {
                KeyBlob.openLegacy(blob, kind: $0, userKey: keys.legacy, uid: uid, app: owner) != nil
            })
        {
            throw KeychainFailure(.param, "the held key is not a key of this user and app")
        }
        return KeyBlob.handle(of: blob)!
    }

    /// Reads a key request: answers it when nobody needs to be asked, else (a signature or an
    /// agreement with a key whose access control has steps) names the proofs it needs.
    func keyStart(_ r: KeyRequest, app: AppIdentity) async -> KeyStart {
        do {
            switch r.operation {
            case .create: return .answered(try await createKey(r, app: app))
            case .open:
                let key = try unseal(r.blob, kind: r.kind, app: app)
                return .answered(KeyReply(publicKey: try key.publicKey.x963Representation))
            case .verify:
                guard r.kind != .keyAgreement else {
                    throw DaemonError(.invalidParameter, "a key agreement key does not verify")
                }
                let key = try unseal(r.blob, kind: r.kind, app: app)
                guard let digest = Self.digest(of: r), let der = r.signature else {
                    throw DaemonError(.invalidParameter, "verify needs a 32-byte digest and a DER signature")
                }
                let publicKey = try key.publicKey
                let valid =
                    (try? P256.Signing.ECDSASignature(derRepresentation: der)).map {
                        publicKey.isValidSignature($0, for: digest)
                    } ?? false
                return .answered(KeyReply(valid: valid))
            case .attest:
                guard let attestor else { throw Self.noAttestation }
                let key = try unseal(r.blob, kind: r.kind, app: app)
                // A key that can never be used again is not vouched for.
                do throws(AccessDenial) {
                    var proofs = try await proofs([(key, key.protected)], rules: .every)
                    if case .denied(let denial) = proofs.next() { throw denial }
                } catch { return .answered(KeyReply(error)) }
                return .answered(KeyReply(certificates: try attestor.chain(for: key)))
            case .attestationRoot:
                guard let attestor else { throw Self.noAttestation }
                return .answered(KeyReply(message: attestor.label, certificates: [try attestor.root]))
            case .tpmEndorsement, .tpmActivateCredential, .tpmCertify:
                return .answered(try await tpmAttest(r, app: app))
            case .sign, .agree:
                let key = try unseal(r.blob, kind: r.kind, app: app)
                // A request that cannot succeed is refused before anyone is asked for a finger.
                let use = try Self.use(of: key, r)
                var pending: PendingKeyUse
                do throws(AccessDenial) {
                    pending = PendingKeyUse(
                        request: r,
                        app: app,
                        key: key,
                        use: use,
                        proofs: try await proofs([(key, key.protected)], rules: .every)
                    )
                } catch { return .answered(KeyReply(error)) }
                switch pending.proofs.next() {
                case .prove: return .proving(pending)
                case .denied(let denial): return .answered(KeyReply(denial))
                case .finished: return .answered(await keyFinish(pending, waited: false))
                }
            }
        } catch {
            return .answered(keyReply(for: error))
        }
    }

    /// Signs or agrees once the proofs accepted the key. `waited`: a step was proven, so the
    /// request waited and the user's state is read again first.
    func keyFinish(_ pending: PendingKeyUse, waited: Bool) async -> KeyReply {
        do {
            // Deleted or invalidated while the prompt was open: it signs nothing.
            if let refusal = try await stillUsable(pending, waited: waited) { return refusal }
            let reply = try await perform(pending.use, with: pending.key)
            // A TPM key's use waited for the TPM, while this user's other requests ran: a key
            // deleted or invalidated meanwhile gives nothing either.
            if pending.key.tpm != nil, let refusal = try await stillUsable(pending, waited: true) { return refusal }
            return reply
        } catch {
            return keyReply(for: error)
        }
    }

    /// nil when the key still exists and its access control still holds; else the answer.
    private func stillUsable(_ pending: PendingKeyUse, waited: Bool) async throws -> KeyReply? {
        do throws(AccessDenial) {
            if let now = try await stateAfterPrompt(for: [pending.key.protected], waited: waited) {
                try AccessPlan.stillUsable([pending.key.protected], planned: pending.proofs.planned, now: now)
            }
        } catch { return KeyReply(error) }
        _ = try liveKey(pending.request.blob, app: pending.app)
        return nil
    }

    private func keyReply(for error: any Error) -> KeyReply {
        switch error {
        case let e as DaemonError where e.keyProblem != nil: return KeyReply(problem: e.keyProblem, message: e.message)
        case let f as KeychainFailure: return KeyReply(problem: .notAvailable, message: f.message)
        default:
            logger.error("key operation failed", metadata: ["uid": "\(uid)", "error": "\(error)"])
            return KeyReply(problem: .notAvailable, message: "the key operation could not complete")
        }
    }

    private static let noAttestation = DaemonError(
        .keyNotAvailable,
        "this daemon's attestation authority is not usable (its log says why): keys are not attested"
    )

    private func createKey(_ r: KeyRequest, app: AppIdentity) async throws -> KeyReply {
        let owner = try owner(app)
        let ac = r.accessControl ?? AccessControlValue(protection: .afterFirstUnlockThisDeviceOnly, flags: [])
        let requirement: AccessRequirement
        do { requirement = try AccessRequirement(flags: ac.flags) } catch {
            throw DaemonError(.invalidParameter, "\(error)")
        }
        if requirement.applicationPassword {
            throw DaemonError(.invalidParameter, "applicationPassword is not supported for Secure Enclave keys")
        }
        if let problem = try await creationProblem(ac.protection, requirement, applicationPasswordGiven: false) {
            throw DaemonError(.keyNotAvailable, problem.description)
        }
        let generation = record.enrolmentGeneration
        let epoch = record.passcodeEpoch
        let made = try await keyEngine.create(r.kind)
        let key = KeyBlob(
            kind: r.kind,
            privateKey: made.privateKey,
            protection: ac.protection,
            flags: ac.flags,
            enrolmentGeneration: generation,
            passcodeEpoch: epoch,
            tpm: made.tpm
        )
        // The record first, durably: a blob is never answered for a key the daemon does not hold.
        let handle = KeyHandle.random()
        let keyKey = SymmetricKey(size: .bits256)
        let keyClass = KeyClass(ac.protection)
        let wrapped = try KeyHierarchy.wrap(
            keyKey,
            under: try classKey(keyClass),
            context: KeyHierarchy.enclaveKeyContext(uid: uid, handle: handle.bytes)
        )
        try storage.insertKeyRecord(
            KeyRecord(
                handle: handle,
                uid: uid,
                app: owner,
                keyClass: keyClass,
                wrapped: wrapped,
                created: clock.wall()
            )
        )
        return KeyReply(
            blob: try key.sealed(key: keyKey, handle: handle, uid: uid, app: owner),
            publicKey: try key.publicKey.x963Representation
        )
    }

    /// The digest to sign or verify: given, or SHA-256 of the given message.
    private static func digest(of r: KeyRequest) -> PrehashedSHA256? {
        if let d = r.digest { return PrehashedSHA256(d) }
        if let m = r.message { return PrehashedSHA256(Data(SHA256.hash(data: m))) }
        return nil
    }

    /// What a sign or agree request asks of a key, checked in full (kind, digest, peer key,
    /// derivation bounds) before its access control is waited.
    enum KeyUse: Sendable {
        case sign(PrehashedSHA256)
        case agree(P256.KeyAgreement.PublicKey, KeyDerivation?)
    }

    private static func use(of key: KeyBlob, _ r: KeyRequest) throws -> KeyUse {
        func refuse(_ message: String) -> DaemonError {
            DaemonError(.invalidParameter, message)
        }
        switch r.operation {
        case .sign:
            guard key.kind != .keyAgreement else { throw refuse("a key agreement key does not sign") }
            guard let digest = digest(of: r) else { throw refuse("sign needs a 32-byte SHA-256 digest or a message") }
            return .sign(digest)
        case .agree:
            guard key.kind != .signing else { throw refuse("a signing key does not agree") }
            guard let peerBytes = r.peerPublicKey,
                let peer = try? P256.KeyAgreement.PublicKey(x963Representation: peerBytes)
            else {
                throw refuse("agree needs the peer's P-256 public key (X9.63)")
            }
            if let d = r.derivation, !(1...65536).contains(d.byteCount) || d.sharedInfo.count > 4096 {
                throw refuse("a derivation takes 1…65536 bytes and at most 4096 bytes of shared info")
            }
            return .agree(peer, r.derivation)
        default:
            throw refuse("not a use of a key")
        }
    }

    private func perform(_ use: KeyUse, with key: KeyBlob) async throws -> KeyReply {
        switch use {
        case .sign(let digest):
            let signature = try await keyEngine.sign(digest, with: key)
            return KeyReply(signature: signature.rawRepresentation, signatureDER: signature.derRepresentation)
        case .agree(let peer, let derivation):
            let secret = try await keyEngine.agree(peer, with: key)
            guard let d = derivation else { return KeyReply(sharedSecret: secret) }
            return KeyReply(derivedKey: X963KeyDerivation.derive(d, sharedSecret: secret))
        }
    }
}
