import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import KeyAttestation

/// The daemon's key attestation: its authority (made on first start, kept in the state sealed
/// under the master key) and the facts about this daemon that each key's certificate states.
struct KeyAttestor: Sendable {
    let authority: AttestationAuthority
    let daemonMode: DaemonMode
    let sensor: KeyDescription.Sensor
    let simulationAllowed: Bool

    /// What a certificate of `key` states.
    func description(of key: KeyBlob) -> KeyDescription {
        KeyDescription(
            daemonMode: daemonMode,
            sensor: sensor,
            simulationAllowed: simulationAllowed,
            keyKind: key.kind,
            protection: key.protection,
            accessControl: key.flags
        )
    }

    /// The x5c of `key`: its certificate, then the attestation key's.
    func chain(for key: KeyBlob) throws -> [Data] {
        // An agreement key is the same P-256 point: certified as a public key all the same.
        try authority.chain(for: try key.publicKey, as: description(of: key))
    }

    /// Which machine and daemon the root is: for the administrator's copy (`lactl
    /// attestation-root` prints it beside the root), never in a certificate.
    let label: String

    var root: Data {
        get throws { try AttestationAuthority.der(authority.root) }
    }

    /// The stored authority, or a new one stored first (a root is made once per state directory:
    /// a server that trusts it keeps trusting this daemon's keys across restarts).
    static func authority(storage: Storage, master: SymmetricKey, daemonMode: DaemonMode) throws -> AttestationAuthority
    {
        let key = sealingKey(master: master)
        let sealed = try storage.attestationAuthority {
            let made = try AttestationAuthority.create(daemonMode: daemonMode)
            return try AES.GCM.seal(try JSONEncoder().encode(made.stored), using: key, authenticating: Self.context)
                .combined!
        }
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
            let json = try? AES.GCM.open(box, using: key, authenticating: Self.context)
        else {
            throw AttestationAuthorityError("the stored attestation authority cannot be opened with this master key")
        }
        let authority = try AttestationAuthority(try JSONDecoder().decode(AttestationAuthority.Stored.self, from: json))
        // Its chains would be refused for saying another mode (or none): say so here instead.
        guard AttestationAuthority.daemonMode(of: authority.certificate) == daemonMode else {
            throw AttestationAuthorityError(
                "the stored attestation authority was made for another daemon mode than \(daemonMode.rawValue)"
            )
        }
        return authority
    }

    private static let context = Data("attestation-authority".utf8)

    private static func sealingKey(master: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            salt: Data("laenclaved attestation authority v1".utf8),
            info: Data(),
            outputByteCount: 32
        )
    }

    /// The stored authority sealed under master key `new` instead of `old` (a move to the TPM
    /// root): the same root, so servers that trust it go on trusting this daemon's keys.
    static func reseal(_ sealed: Data, from old: SymmetricKey, to new: SymmetricKey) throws -> Data {
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
            let json = try? AES.GCM.open(box, using: sealingKey(master: old), authenticating: context)
        else {
            throw AttestationAuthorityError("the stored attestation authority cannot be opened with this master key")
        }
        return try AES.GCM.seal(json, using: sealingKey(master: new), authenticating: context).combined!
    }

    /// The machine, the user for a user-mode daemon, and the root's fingerprint.
    static func label(mode: DaemonMode, uid: UInt32, authority: AttestationAuthority) -> String {
        let host = ProcessInfo.processInfo.hostName
        let fingerprint = (try? AttestationAuthority.fingerprint(of: authority.root)) ?? "?"
        return (mode == .system ? "\(host), system daemon" : "\(host), user daemon of uid \(uid)")
            + ", SHA-256 of its key \(fingerprint)"
    }
}
