import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The master key as the daemon's root gives it (`HardwareRoot` decides which): the key file alone
/// (the software root), or the key file mixed with a secret sealed to the TPM — HKDF-SHA256 of the
/// unsealed secret, salted with the key file — so that neither the disk (state and key file, copied
/// or restored elsewhere) nor the TPM alone gives it, the model of systemd-creds' host+tpm2. The
/// secret is unsealed once, at start, and kept only in the derived key.
enum MasterKeyRoot {

    struct Opened {
        let key: SymmetricKey
        let root: MasterSecretRoot
        /// What the daemon says at start about its root.
        let note: String?
        /// On a TPM root: the TPM, and the rollback counter's auth value (from the sealed secret,
        /// so only this state's TPM gives it).
        var counter: (tcti: String, auth: [UInt8])? = nil
        /// `--issue-tpm-recovery`: the TPM's secret, kept for that one-shot only (`TPMRootRecovery`).
        var secretToIssueFor: [UInt8]? = nil
        /// On a state moved from the software root (`SoftwareRootMove`): the key file's key, which
        /// still opens Secure Enclave key blobs apps kept from before key records, and checks
        /// passcode verifiers not remade since the move.
        var softwareKey: SymmetricKey? = nil
    }

    /// Root's one-shots on a TPM root (the daemon stopped): seal the state's master secret to the
    /// TPM the machine has now from the recovery secret, or issue a new recovery secret.
    enum OneShot: Sendable {
        case recover(secret: String)
        case issueRecovery
        /// A software-root state moved to the TPM root, and its recovery secret issued.
        case moveToTPM

        var flag: String {
            switch self {
            case .recover: "--recover-tpm-root"
            case .issueRecovery: "--issue-tpm-recovery"
            case .moveToTPM: "--move-to-tpm"
            }
        }
    }

    /// What the state keeps to tell its master key (a key file swapped or lost says so).
    static func check(of key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data("laenclaved master key check".utf8), using: key))
    }

    /// The sealed secret's blob, in the state directory: it is the state's record that its root is
    /// a TPM.
    static let blobName = "tpm-root.blob"

    /// `oneShot`: root's recovery (the TPM's secret from the recovery box, sealed to the TPM the
    /// machine has now) or a new recovery secret (`TPMRootRecovery`).
    static func open(
        config: DaemonConfiguration,
        storage: Storage,
        oneShot: OneShot? = nil,
        logger: Logger
    ) throws -> Opened {
        let hostKey = try EnclaveDaemon.loadMasterKey(config.masterKeyPath)
        let blobPath = config.stateDirectory + "/" + blobName
        let record = try storage.masterKeyRecord()
        let machine = access(TPMDevice.machineDevice, R_OK | W_OK) == 0 ? TPMDevice.machineTCTI : nil
        let namedTPM: String? =
            switch config.tpm {
            case .tcti(let tcti): tcti
            case .auto: machine
            case .off: nil
            }
        try SoftwareRootMove.tidy(
            stateDirectory: config.stateDirectory,
            movedState: record.root == MasterSecretRoot.tpm.rawValue,
            tcti: namedTPM,
            logger: logger
        )
        let blob = try readBlob(blobPath)
        let recorded: HardwareRoot.Recorded
        let named = try record.root.map { raw in
            guard let root = MasterSecretRoot(rawValue: raw) else {
                throw DaemonError(.masterKeyRoot, "this state names an unknown root \"\(raw.prefix(16))\"")
            }
            return root
        }
        var recovering = false
        if case .recover = oneShot { recovering = true }
        switch (named, blob != nil) {
        case (.tpm?, false) where recovering:
            recorded = .tpm  // the box recovers it without its blob
        case (.tpm?, false):
            throw DaemonError(
                .masterKeyRoot,
                "this state's master secret is sealed to a TPM, but \(blobPath) is missing: restore it from the same copy as the state (without it the state never opens)"
            )
        case (.software?, true):
            throw DaemonError(
                .masterKeyRoot,
                "\(blobPath) does not belong to this state, which was made with the software root: move it away"
            )
        case (_, true): recorded = .tpm  // recorded, or sealed by a start that ended before recording it
        case (.software?, false): recorded = .software
        case (nil, false):
            // A state from before roots were recorded is the software root's; only an empty one is new.
            recorded = record.confirmed || record.holdsData ? .software : .new
        }
        let marker = movedMarker(keyFile: config.masterKeyPath)
        if recorded == .software, let moved = FileManager.default.contents(atPath: marker),
            String(decoding: moved, as: UTF8.self).contains(try storage.identity())
        {
            throw DaemonError(
                .masterKeyRoot,
                "the state this key file opens was moved to the TPM root (\(marker)): this software-root state is a copy from before the move, whose passcode counters would go back. Put back the state the move left; to start this copy anyway, remove \(marker)"
            )
        }
        // Root's one-shots act on a state sealed to a TPM, never make one (a mistyped path or mode
        // would seal a new state and answer for it); the move, on a software root's.
        var moving = config.moveToTPM
        if case .moveToTPM = oneShot {
            moving = true
            guard recorded == .software else {
                throw DaemonError(
                    .masterKeyRoot,
                    recorded == .tpm
                        ? "--move-to-tpm: the state in \(config.stateDirectory) is sealed to a TPM already"
                        : "--move-to-tpm: there is no state in \(config.stateDirectory) (the daemon's --system, --state-dir and --key-file?)"
                )
            }
        } else if let oneShot, recorded != .tpm {
            throw DaemonError(
                .masterKeyRoot,
                "\(oneShot.flag): there is no state sealed to a TPM in \(config.stateDirectory) (the daemon's --system, --state-dir and --key-file?)"
            )
        }
        let decision = HardwareRoot.decide(
            setting: config.tpm,
            recorded: recorded,
            machineTPM: machine,
            requireTPM: config.requireTPM,
            move: moving
        )
        var notes: [String] = []
        let secret: [UInt8]
        let tcti: String
        switch decision {
        case .refuse(let why):
            throw DaemonError(.masterKeyRoot, why)
        case .software(let note):
            if case .moveToTPM = oneShot { throw DaemonError(.masterKeyRoot, "--move-to-tpm: \(note ?? "no TPM")") }
            return Opened(key: hostKey, root: .software, note: note)
        case .move(let to):
            tcti = to
            secret = try SoftwareRootMove.perform(
                storage: storage,
                stateDirectory: config.stateDirectory,
                hostKey: hostKey,
                keyFile: config.masterKeyPath,
                tcti: tcti,
                logger: logger
            )
        case .tpm(let to):
            tcti = to
            if case .recover(let typed) = oneShot {
                if let blob, (try? TPMDevice.unseal(Array(blob), tcti: tcti)) != nil {
                    throw DaemonError(
                        .masterKeyRoot,
                        "--recover-tpm-root: \(tcti) still opens this state, so there is nothing to recover (a state refused against its rollback counter is --reanchor's)"
                    )
                }
                secret = try TPMRootRecovery.open(secret: typed, stateDirectory: config.stateDirectory)
                // Its attestation key was the old TPM's: the next use makes one in this TPM. First,
                // so that a recovery that got as far as the seal left none behind.
                try TPMAttestationKeys.forget(in: storage)
                try seal(secret, to: tcti, keptAt: blobPath, what: "the recovered secret")
                notes.append(
                    "--recover-tpm-root: the master secret is sealed to \(tcti) again, from the recovery secret"
                )
            } else if let blob {
                do { secret = try TPMDevice.unseal(Array(blob), tcti: tcti) } catch {
                    throw DaemonError(
                        .masterKeyRoot,
                        "the master secret sealed to the TPM does not open with \(tcti) (\(error)): a state opens only with the TPM it was sealed to — a copied state never opens elsewhere; after a TPM clear, a new mainboard or an fTPM reset, root seals it again with the recovery secret (laenclaved --recover-tpm-root)"
                    )
                }
            } else {
                secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
                try seal(
                    secret,
                    to: tcti,
                    keptAt: blobPath,
                    what: "the master secret",
                    hint: " (nothing was made; tpm = off uses the software root instead)"
                )
                notes.append(
                    "this new state's master secret is now sealed to the TPM (\(tcti)): a copy opens nothing elsewhere"
                )
            }
        }
        var toIssueFor: [UInt8]?
        switch oneShot {
        case .issueRecovery?, .moveToTPM?:
            toIssueFor = secret
        default:
            if !TPMRootRecovery.issued(stateDirectory: config.stateDirectory) {
                let mode = config.mode == .system ? "--system " : ""
                notes.append(
                    "no recovery secret was issued for this state: after a TPM clear, a new mainboard or an fTPM reset it would be lost. Root issues one, shown once: stop the daemon and, as its user, run laenclaved \(mode)--state-dir \(config.stateDirectory) --key-file \(config.masterKeyPath) --tpm \(tcti) --issue-tpm-recovery"
                )
            }
        }
        let moved = record.moved || moveAsked(decision)
        // Written again by any start that finds it missing (a stop right after the move).
        if moved, access(marker, F_OK) != 0, let identity = try storage.preMoveIdentity() {
            let text =
                "this key file's state moved to the TPM root; a copy of it from before has identity \(identity)\n"
            try Storage.writePrivateFile(Data(text.utf8), to: marker)
        }
        let note = notes.isEmpty ? nil : notes.joined(separator: "; ")
        return Opened(
            key: mixed(tpmSecret: secret, hostKey: hostKey),
            root: .tpm,
            note: note,
            counter: (tcti, counterAuth(tpmSecret: secret)),
            secretToIssueFor: toIssueFor,
            softwareKey: moved ? hostKey : nil
        )
    }

    /// Beside the key file once its state moved to the TPM root (`SoftwareRootMove`), naming the
    /// state's identity before the move (`Storage.identity`): a software-root state with that
    /// identity is a copy from before the move, refused; a new state made with the key file is not.
    static func movedMarker(keyFile: String) -> String { keyFile + ".moved-to-tpm" }

    private static func moveAsked(_ decision: HardwareRoot.Decision) -> Bool {
        if case .move = decision { return true }
        return false
    }

    /// Seals `secret` to the TPM and keeps the blob at `path` (written whole or not at all).
    private static func seal(
        _ secret: [UInt8],
        to tcti: String,
        keptAt path: String,
        what: String,
        hint: String = ""
    ) throws {
        let sealed: [UInt8]
        do { sealed = try TPMDevice.seal(secret, tcti: tcti) } catch {
            throw DaemonError(.masterKeyRoot, "the TPM (\(tcti)) could not seal \(what): \(error)\(hint)")
        }
        try Storage.writePrivateFile(Data(sealed), to: path)
    }

    /// The blob, nil when there is none; any other failure to read it refuses (a blob that could
    /// not be read is not a state without one).
    private static func readBlob(_ path: String) throws -> Data? {
        do { return try Data(contentsOf: URL(fileURLWithPath: path)) } catch let error as CocoaError
            where error.code == .fileReadNoSuchFile
        {
            return nil
        } catch {
            throw DaemonError(.masterKeyRoot, "\(path) could not be read: \(error)")
        }
    }

    /// The rollback counter's auth value: the TPM alone (its sealed secret) gives it.
    static func counterAuth(tpmSecret: [UInt8]) -> [UInt8] {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: tpmSecret),
            info: Array("laenclaved TPM rollback counter auth".utf8),
            outputByteCount: 32
        ).withUnsafeBytes { Array($0) }
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
