import Crypto
import EnclaveCore
import Foundation
import GRDB
import Synchronization
import TPMWire

/// The daemon's attestation key on a TPM root (issue 31, item 6): made once inside the TPM
/// (restricted: it signs only what the TPM itself states), kept as the TPM's blob and its auth
/// value, sealed in the state's `meta` under a key the master key derives, as every TPM key's blob
/// is sealed. One per daemon: a server certifies it once, then every key's certify statement.
///
/// A TPM clear takes the key with it: root's recovery (`--recover-tpm-root`) forgets the stored
/// one (`forget`), and the next use makes a new one, which a server certifies anew.
final class TPMAttestationKeys: Sendable {
    private let storage: Storage
    private let sealingKey: SymmetricKey
    private let made = Mutex<TPMKeyMaterial?>(nil)
    private let endorsed = Mutex<Endorsement?>(nil)

    /// The TPM's endorsement key, its template and its maker's certificate: fixed for the TPM's life.
    struct Endorsement: Sendable {
        let template: TPMDevice.EndorsementTemplate
        let publicArea: [UInt8]
        let certificate: [UInt8]?
    }

    /// The endorsement (the template whose certificate the TPM's maker stored: P-256's, else
    /// P-384's; P-256's without one when neither is there), read once. On the TPM's thread.
    func endorsement(tcti: String) throws -> Endorsement {
        try endorsed.withLock { known throws -> Endorsement in
            if let known { return known }
            var chosen: (TPMDevice.EndorsementTemplate, [UInt8]?) = (.eccP256, nil)
            for template in TPMDevice.EndorsementTemplate.allCases {
                let read = Result { () throws(DaemonError) in try TPMDevice.endorsementCertificate(template, tcti: tcti)
                }
                switch read {
                case .success(let der): chosen = (template, der)
                case .failure(let error):
                    if error.tpmObjectMissing { continue }
                    throw error
                }
                break
            }
            let area = try TPMDevice.endorsementKey(chosen.0, tcti: tcti)
            // A maker may have certified a key from its own template or nonce (in NV beside the
            // certificate), which this code does not derive: said, not answered as another key.
            if let certificate = chosen.1, let point = (try? TPMPublicArea(area))?.x963,
                certificate.firstRange(of: point) == nil
            {
                throw DaemonError(
                    .attestationKey,
                    "this TPM's endorsement certificate is not of the key its TCG template gives (a maker's own template or nonce is not supported yet)"
                )
            }
            let endorsement = Endorsement(template: chosen.0, publicArea: area, certificate: chosen.1)
            known = endorsement
            return endorsement
        }
    }

    init(storage: Storage, master: SymmetricKey) {
        self.storage = storage
        sealingKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            info: Data("laenclaved TPM attestation key".utf8),
            outputByteCount: 32
        )
    }

    private static let context = Data("tpm-attestation-key".utf8)
    private static let name = "tpmAttestationKey"

    /// Forgets the stored key (made in a TPM that was cleared).
    static func forget(in storage: Storage) throws {
        try storage.pool.write { db in try db.execute(sql: "DELETE FROM meta WHERE name = ?", arguments: [name]) }
    }

    /// The attestation key, made and stored on first use. On the TPM's thread: it blocks.
    func key(tcti: String, primary: TPMPrimaryContext) throws -> TPMKeyMaterial {
        try made.withLock { held throws -> TPMKeyMaterial in
            if let held { return held }
            let stored = try storage.pool.read { db in
                try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = ?", arguments: [Self.name])
            }
            if let stored {
                guard let box = try? AES.GCM.SealedBox(combined: stored),
                    let json = try? AES.GCM.open(box, using: sealingKey, authenticating: Self.context)
                else {
                    throw DaemonError(
                        .attestationKey,
                        "the stored TPM attestation key does not open with this master key"
                    )
                }
                let opened = try JSONDecoder().decode(TPMKeyMaterial.self, from: json)
                held = opened
                return opened
            }
            let auth = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
            let blob = try TPMDevice.createAttestationKey(auth: auth, tcti: tcti, primary: primary)
            guard let area = TPMDevice.publicArea(ofBlob: blob) else {
                throw DaemonError(.attestationKey, "the TPM returned an attestation key without its public area")
            }
            let material = TPMKeyMaterial(blob: Data(blob), auth: Data(auth), publicKey: Data(area))
            let sealed = try AES.GCM.seal(
                try JSONEncoder().encode(material),
                using: sealingKey,
                authenticating: Self.context
            ).combined!
            try storage.pool.write { db in
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                    arguments: [Self.name, sealed]
                )
            }
            held = material
            return material
        }
    }
}
