import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A state made with the software root moves to the TPM root in place (issue 31, item 7), keeping
/// every item, key, right, passcode and counter: `laenclaved --move-to-tpm` (root's one-shot, the
/// daemon stopped, which also issues the recovery secret) or `move-to-tpm = yes` at start.
///
/// What the key file's key wrapped is wrapped again under the TPM root's master key: each user's
/// class keys (below which every item and Secure Enclave key has its own key, untouched), the
/// passcode verifiers (keyed again without the passcode, `PasscodeVerifier.moved`) and the
/// attestation authority (the same root: servers keep trusting the keys). Then the old wraps are
/// shredded from the files. Keys made before the move stay where they were made, in the daemon
/// (`KeyEngine`); keys made afterwards are the TPM's.
///
/// Crash safety: the sealed secret is written beside the state under a name of its own, the
/// rollback counter is defined, and one transaction moves everything and binds the counter; only
/// then does the blob take its name. A stop at any instant leaves the state wholly on the software
/// root (the pending blob is removed at the next start) or wholly moved (the blob is named then).
///
/// Our choices: copies of the state taken before the move stay openable with the key file — the
/// move cannot reach them, and the docs say to destroy them. Secure Enclave key blobs from before
/// key records (kept by apps, opened with the key file's legacy key) keep working as they did.
enum SoftwareRootMove {
    /// The sealed secret before the move commits.
    static let pendingBlobName = MasterKeyRoot.blobName + ".moving"

    struct MoveError: Error, CustomStringConvertible {
        let description: String
    }

    /// Moves the software-root state whose key file's key is `hostKey` to the TPM `tcti`: answers
    /// the TPM's new secret (the master key is `MasterKeyRoot.mixed` of it).
    static func perform(
        storage: Storage,
        stateDirectory: String,
        hostKey: SymmetricKey,
        tcti: String,
        logger: Logger
    ) throws -> [UInt8] {
        // Items from before class keys are upgraded under the key that sealed them first.
        _ = try storage.upgradeSealing(master: hostKey)
        let secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let sealed: [UInt8]
        do {
            sealed = try TPMDevice.seal(secret, tcti: tcti)
            // Opened once before anything depends on it.
            guard try TPMDevice.unseal(sealed, tcti: tcti) == secret else {
                throw MoveError(description: "the TPM unsealed another secret than it sealed")
            }
        } catch {
            throw MoveError(description: "move-to-tpm: the TPM (\(tcti)) could not seal the master secret: \(error)")
        }
        let pending = stateDirectory + "/" + pendingBlobName
        try Storage.writePrivateFile(Data(sealed), to: pending)
        let counter: TPMDevice.Counter
        do {
            counter = try TPMDevice.defineCounter(auth: MasterKeyRoot.counterAuth(tpmSecret: secret), tcti: tcti)
        } catch {
            unlink(pending)
            throw MoveError(
                description: "move-to-tpm: the TPM (\(tcti)) could not define the rollback counter: \(error)"
            )
        }
        let moved: (classKeys: Int, verifiers: Int)
        do {
            moved = try storage.moveRoot(
                from: hostKey,
                to: MasterKeyRoot.mixed(tpmSecret: secret, hostKey: hostKey),
                counter: counter
            )
        } catch {
            unlink(pending)
            try? TPMDevice.undefineCounter(index: counter.index, tcti: tcti)
            throw error
        }
        // The old wraps' page images, until the WAL is checkpointed (every start shreds it too).
        storage.shred()
        try finishPending(stateDirectory: stateDirectory)
        logger.notice(
            "this state moved from the software root to the TPM root (\(tcti)): every item, key and counter is kept; copies of the state taken before the move still open with the key file: destroy them",
            metadata: ["classKeys": "\(moved.classKeys)", "passcodes": "\(moved.verifiers)"]
        )
        return secret
    }

    /// The blob of a move that committed takes its name (a stop came between); one whose move never
    /// committed goes. `movedState`: the state records a TPM root.
    static func tidy(stateDirectory: String, movedState: Bool, logger: Logger) throws {
        let pending = stateDirectory + "/" + pendingBlobName
        guard access(pending, F_OK) == 0 else { return }
        let named = stateDirectory + "/" + MasterKeyRoot.blobName
        if movedState, access(named, F_OK) != 0 {
            try finishPending(stateDirectory: stateDirectory)
            logger.notice("the move to the TPM root a stop interrupted is finished")
        } else {
            unlink(pending)
            if !movedState {
                logger.notice(
                    "a move to the TPM root was interrupted before it took effect: the state is still the software root's (its TPM counter may be left defined)"
                )
            }
        }
    }

    private static func finishPending(stateDirectory: String) throws {
        let pending = stateDirectory + "/" + pendingBlobName
        guard rename(pending, stateDirectory + "/" + MasterKeyRoot.blobName) == 0 else {
            throw MoveError(description: "\(pending) could not be renamed: \(String(cString: strerror(errno)))")
        }
        let directory = open(stateDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }
}

extension Storage {
    /// Everything master key `old` wraps, wrapped under `new` instead, the state recorded as a TPM
    /// root's moved from the software root and bound to `counter`: one durable transaction.
    /// `secure_delete` zeroes the old wraps' cells; their page images in the database file go with
    /// the WAL's truncating checkpoint (`shred`) that follows.
    func moveRoot(
        from old: SymmetricKey,
        to new: SymmetricKey,
        counter: TPMDevice.Counter
    ) throws -> (classKeys: Int, verifiers: Int) {
        try pool.write { db in
            let stored = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'masterKeyCheck'")
            if let stored, !ConstantTime.equal(stored, MasterKeyRoot.check(of: old)) {
                throw SoftwareRootMove.MoveError(description: "move-to-tpm: the key file does not belong to this state")
            }
            let classKeys = try Row.fetchAll(db, sql: "SELECT uid, class, wrapped FROM class_key")
            for row in classKeys {
                let uid = UInt32(truncatingIfNeeded: row["uid"] as Int64)
                let name: String = row["class"]
                guard let keyClass = KeyClass(rawValue: name) else {
                    throw SoftwareRootMove.MoveError(description: "move-to-tpm: a class key of unknown class")
                }
                let context = KeyHierarchy.classKeyContext(uid: uid, keyClass)
                guard
                    let key = KeyHierarchy.unwrap(
                        row["wrapped"],
                        under: KeyHierarchy.wrappingKey(master: old, uid: uid),
                        context: context
                    )
                else { throw KeyStoreError.classKeyDamaged(uid, keyClass) }
                let wrapped = try KeyHierarchy.wrap(
                    key,
                    under: KeyHierarchy.wrappingKey(master: new, uid: uid),
                    context: context
                )
                try db.execute(
                    sql: "UPDATE class_key SET wrapped = ? WHERE uid = ? AND class = ?",
                    arguments: [wrapped, Int64(uid), name]
                )
            }
            let users = try Row.fetchAll(db, sql: "SELECT uid, passcode FROM user WHERE passcode IS NOT NULL")
            for row in users {
                let uid = UInt32(truncatingIfNeeded: row["uid"] as Int64)
                let verifier = try JSONDecoder().decode(PasscodeVerifier.self, from: row["passcode"] as Data)
                let moved = try verifier.moved(
                    to: KeyHierarchy.passcodeKey(master: new, uid: uid),
                    from: KeyHierarchy.passcodeKey(master: old, uid: uid)
                )
                try db.execute(
                    sql: "UPDATE user SET passcode = ? WHERE uid = ?",
                    arguments: [try JSONEncoder().encode(moved), Int64(uid)]
                )
            }
            // An authority that does not open stays as it is: keys go unattested either way.
            if let sealed = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'attestationAuthority'"),
                let resealed = try? KeyAttestor.reseal(sealed, from: old, to: new)
            {
                try db.execute(
                    sql: "UPDATE meta SET value = ? WHERE name = 'attestationAuthority'",
                    arguments: [resealed]
                )
            }
            for (name, value) in [
                ("masterKeyCheck", MasterKeyRoot.check(of: new)), ("root", Data(MasterSecretRoot.tpm.rawValue.utf8)),
                ("movedFromSoftwareRoot", Data([1])),
            ] {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                    arguments: [name, value]
                )
            }
            try Self.writeAnchor(db, key: Self.anchorKey(master: new), index: counter.index, generation: counter.value)
            return (classKeys.count, users.count)
        }
    }
}
