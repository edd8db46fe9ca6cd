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
/// Crash safety: the rollback counter is defined, the sealed secret is written beside the state
/// under a name of its own with the counter's index, and one transaction moves everything and binds
/// the counter; only then does the blob take its name. A stop at any instant leaves the state
/// wholly on the software root (the next start removes the pending blob and the counter it names)
/// or wholly moved (the next start names the blob). A marker beside the key file
/// (`MasterKeyRoot.movedMarker`) refuses a copy of the state from before the move afterwards.
///
/// Our choices: copies of the state taken before the move stay openable with the key file elsewhere
/// — the move cannot reach them, and the docs say to destroy them. Secure Enclave key blobs from before
/// key records (kept by apps, opened with the key file's legacy key) keep working as they did.
enum SoftwareRootMove {
    /// The move before it commits: the rollback counter's index (4 bytes, big-endian), then the
    /// sealed secret (which gives the counter's auth value, to remove a counter never used).
    static let pendingName = MasterKeyRoot.blobName + ".moving"

    /// Moves the software-root state whose key file (`keyFile`) holds `hostKey` to the TPM `tcti`:
    /// answers the TPM's new secret (the master key is `MasterKeyRoot.mixed` of it).
    static func perform(
        storage: Storage,
        stateDirectory: String,
        hostKey: SymmetricKey,
        keyFile: String,
        tcti: String,
        logger: Logger
    ) throws -> [UInt8] {
        // The key file first: under a wrong one the upgrade below would store class keys that the
        // right one can never open.
        switch try storage.masterKeyMatches(MasterKeyRoot.check(of: hostKey)) {
        case true?: break
        case false?:
            throw DaemonError(
                .rootMove,
                "move-to-tpm: the key file \(keyFile) does not belong to the state in \(stateDirectory); nothing was changed"
            )
        case nil:
            throw DaemonError(
                .rootMove,
                "move-to-tpm: the state in \(stateDirectory) does not record its key file yet: start the daemon once on the software root (it records it), then move; nothing was changed"
            )
        }
        // Items from before class keys are upgraded under the key that sealed them first.
        _ = try storage.upgradeSealing(master: hostKey)
        let secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let sealed: [UInt8]
        let counter: TPMDevice.Counter
        do {
            sealed = try TPMDevice.seal(secret, tcti: tcti)
            // Opened once before anything depends on it.
            guard try TPMDevice.unseal(sealed, tcti: tcti) == secret else {
                throw DaemonError(.rootMove, "the TPM unsealed another secret than it sealed")
            }
            counter = try TPMDevice.defineCounter(auth: MasterKeyRoot.counterAuth(tpmSecret: secret), tcti: tcti)
        } catch {
            throw DaemonError(.rootMove, "move-to-tpm: the TPM (\(tcti)) could not take the master secret: \(error)")
        }
        let pending = stateDirectory + "/" + pendingName
        let moved: (classKeys: Int, verifiers: Int)
        do {
            let index = withUnsafeBytes(of: counter.index.bigEndian) { Data($0) }
            try Storage.writePrivateFile(index + sealed, to: pending)
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

    /// A move a stop interrupted. Committed (`movedState`): its blob takes its name. Never
    /// committed: it goes, with the counter it defined when `tcti` (the TPM the daemon is told
    /// of) still holds it under the pending secret's auth value.
    static func tidy(stateDirectory: String, movedState: Bool, tcti: String?, logger: Logger) throws {
        let pending = stateDirectory + "/" + pendingName
        guard let bytes = FileManager.default.contents(atPath: pending) else { return }
        if movedState {
            if access(stateDirectory + "/" + MasterKeyRoot.blobName, F_OK) != 0 {
                try finishPending(stateDirectory: stateDirectory)
                logger.notice("the move to the TPM root a stop interrupted is finished")
            } else {
                unlink(pending)
            }
            return
        }
        var removed = false
        if let tcti, bytes.count > 4 {
            let index = bytes.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if let secret = try? TPMDevice.unseal(Array(bytes.dropFirst(4)), tcti: tcti) {
                let auth = MasterKeyRoot.counterAuth(tpmSecret: secret)
                if (try? TPMDevice.readCounter(index: index, auth: auth, tcti: tcti)) != nil {
                    removed = (try? TPMDevice.undefineCounter(index: index, tcti: tcti)) != nil
                }
            }
        }
        unlink(pending)
        let counter = removed ? "; the counter it defined is removed" : ""
        logger.notice(
            "a move to the TPM root was interrupted before it took effect: the state is still the software root's\(counter)"
        )
    }

    /// The pending blob, without its counter's index, under its own name; then the pending file goes.
    private static func finishPending(stateDirectory: String) throws {
        let pending = stateDirectory + "/" + pendingName
        guard let bytes = FileManager.default.contents(atPath: pending), bytes.count > 4 else {
            throw DaemonError(.rootMove, "\(pending) cannot be read: restore the state from before the move")
        }
        try Storage.writePrivateFile(bytes.dropFirst(4), to: stateDirectory + "/" + MasterKeyRoot.blobName)
        unlink(pending)
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
                throw DaemonError(.rootMove, "move-to-tpm: the key file does not belong to this state")
            }
            let classKeys = try Row.fetchAll(db, sql: "SELECT uid, class, wrapped FROM class_key")
            var opened = 0
            for row in classKeys {
                let uid = UInt32(truncatingIfNeeded: row["uid"] as Int64)
                let name: String = row["class"]
                guard let keyClass = KeyClass(rawValue: name) else {
                    throw DaemonError(.rootMove, "move-to-tpm: a class key of unknown class")
                }
                let context = KeyHierarchy.classKeyContext(uid: uid, keyClass)
                guard
                    let key = KeyHierarchy.unwrap(
                        row["wrapped"],
                        under: KeyHierarchy.wrappingKey(master: old, uid: uid),
                        context: context
                    )
                else {
                    // Damaged before (the key file is this state's): its items stay as unreadable as
                    // they were, and every other user moves.
                    logger.error(
                        "a class key does not open with the master key; left as it is",
                        metadata: ["uid": "\(uid)", "class": "\(name)"]
                    )
                    continue
                }
                opened += 1
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
            // Not one opens: not damage but the wrong key, whatever the check value said.
            guard classKeys.isEmpty || opened > 0 else {
                throw DaemonError(.rootMove, "move-to-tpm: no class key opens with the key file")
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
            // What tells a copy of this state from before the move (`MasterKeyRoot.movedMarker`).
            let authority = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'attestationAuthority'")
            try db.execute(
                sql: "INSERT OR REPLACE INTO meta (name, value) VALUES ('preMoveIdentity', ?)",
                arguments: [Data(Self.identity(of: authority).utf8)]
            )
            // An authority that does not open stays as it is: keys go unattested either way.
            if let sealed = authority,
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
