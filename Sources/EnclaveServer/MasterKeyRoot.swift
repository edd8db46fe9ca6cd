import Crypto
import EnclaveCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The master key as the daemon's root gives it (`HardwareRoot` decides which): the key file alone
/// (the software root), or the key file mixed with a secret sealed to the TPM — HKDF-SHA256 of the
/// unsealed secret, salted with the key file — so that neither the disk (state and key file, copied
/// or restored elsewhere) nor the TPM alone gives it, the model of systemd-creds' host+tpm2. The
/// secret is unsealed once, at start, and kept only in the derived key.
enum MasterKeyRoot {
    enum Root: String, Sendable { case tpm, software }

    struct Opened {
        let key: SymmetricKey
        let root: Root
        /// What the daemon says at start about its root.
        let note: String?
    }

    /// The sealed secret's blob, in the state directory: it is the state's record that its root is
    /// a TPM.
    static let blobName = "tpm-root.blob"

    struct RootError: Error, CustomStringConvertible {
        let description: String
    }

    static func open(config: DaemonConfiguration, storage: Storage) throws -> Opened {
        let hostKey = try EnclaveDaemon.loadMasterKey(config.masterKeyPath)
        let blobPath = config.stateDirectory + "/" + blobName
        let blob = FileManager.default.contents(atPath: blobPath)
        let recorded: HardwareRoot.Recorded = blob != nil ? .tpm : (try storage.hasMasterKeyCheck() ? .software : .new)
        let machine = access(TPMDevice.machineDevice, R_OK | W_OK) == 0 ? TPMDevice.machineTCTI : nil
        let decision = HardwareRoot.decide(
            setting: config.tpm,
            recorded: recorded,
            machineTPM: machine,
            requireTPM: config.requireTPM
        )
        switch decision {
        case .refuse(let why):
            throw RootError(description: why)
        case .software(let note):
            return Opened(key: hostKey, root: .software, note: note)
        case .tpm(let tcti):
            let secret: [UInt8]
            if let blob {
                do { secret = try TPMDevice.unseal(Array(blob), tcti: tcti) } catch {
                    throw RootError(
                        description:
                            "the master secret sealed to the TPM does not open with \(tcti) (\(error)): a state opens only with the TPM it was sealed to — a copied state never opens on another machine; after a TPM clear or a new mainboard, the recovery is needed"
                    )
                }
            } else {
                secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
                let sealed: [UInt8]
                do { sealed = try TPMDevice.seal(secret, tcti: tcti) } catch {
                    throw RootError(description: "the TPM (\(tcti)) could not seal the master secret: \(error)")
                }
                try Storage.writePrivateFile(Data(sealed), to: blobPath)
            }
            return Opened(key: mixed(tpmSecret: secret, hostKey: hostKey), root: .tpm, note: nil)
        }
    }

    /// The master key of a TPM root.
    static func mixed(tpmSecret: [UInt8], hostKey: SymmetricKey) -> SymmetricKey {
        hostKey.withUnsafeBytes { salt in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: tpmSecret),
                salt: Array(salt),
                info: Array("laenclaved TPM root master key".utf8),
                outputByteCount: 32
            )
        }
    }
}
