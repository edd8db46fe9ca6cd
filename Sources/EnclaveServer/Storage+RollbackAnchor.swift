import Crypto
import EnclaveCore
import Foundation
import GRDB

/// The state's generation and its seal over every user's record (`RollbackCounter`), kept in
/// `meta` on a TPM root. The seal is an HMAC under a key the master key derives (so only this
/// state's TPM and key file make one) over the generation, the counter's index and every user's
/// stored record: a record put back from an older copy beside the current generation breaks it.
struct RollbackAnchor: Codable, Equatable, Sendable {
    var index: UInt32
    var generation: UInt64
    var seal: Data
}

extension Storage {
    static func anchorKey(master: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            info: Data("laenclaved rollback anchor".utf8),
            outputByteCount: 32
        )
    }

    /// The anchor, nil when this state has none.
    static func readAnchor(_ db: Database) throws -> RollbackAnchor? {
        try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'rollbackAnchor'").map {
            try JSONDecoder().decode(RollbackAnchor.self, from: $0)
        }
    }

    /// Seals the users' records as they are in this transaction at `generation`.
    static func writeAnchor(_ db: Database, key: SymmetricKey, index: UInt32, generation: UInt64) throws {
        let anchor = RollbackAnchor(
            index: index,
            generation: generation,
            seal: try seal(db, key: key, index: index, generation: generation)
        )
        try db.execute(
            sql: "INSERT OR REPLACE INTO meta (name, value) VALUES ('rollbackAnchor', ?)",
            arguments: [try JSONEncoder().encode(anchor)]
        )
    }

    /// Whether the stored anchor seals the records as they are.
    static func anchorIsIntact(_ anchor: RollbackAnchor, _ db: Database, key: SymmetricKey) throws -> Bool {
        let expected = try seal(db, key: key, index: anchor.index, generation: anchor.generation)
        return ConstantTime.equal(expected, anchor.seal)
    }

    private static func seal(_ db: Database, key: SymmetricKey, index: UInt32, generation: UInt64) throws -> Data {
        var mac = HMAC<SHA256>(key: key)
        mac.update(data: Data("laenclaved rollback anchor v1".utf8))
        mac.update(data: bigEndian(UInt64(index)) + bigEndian(generation))
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT uid, ledger, passcode, domainSecret, enrolmentGeneration, enrolment, passcodeEpoch,
                       loginPasswordAttempts, enrolmentChangedElsewhereAt FROM user ORDER BY uid
                """
        )
        while let row = try rows.next() {
            mac.update(data: Data([0x55]))
            for column in 0..<row.count {
                // Each value typed and length-prefixed: no two records hash alike.
                switch (row[column] as DatabaseValue).storage {
                case .null: mac.update(data: Data([0]))
                case .int64(let int): mac.update(data: Data([1]) + bigEndian(UInt64(bitPattern: int)))
                case .double(let double): mac.update(data: Data([2]) + bigEndian(double.bitPattern))
                case .string(let text):
                    let bytes = Data(text.utf8)
                    mac.update(data: Data([3]) + bigEndian(UInt64(bytes.count)) + bytes)
                case .blob(let blob): mac.update(data: Data([4]) + bigEndian(UInt64(blob.count)) + blob)
                }
            }
        }
        return Data(mac.finalize())
    }

    private static func bigEndian(_ value: UInt64) -> Data { withUnsafeBytes(of: value.bigEndian) { Data($0) } }
}
