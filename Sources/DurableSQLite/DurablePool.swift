import Foundation
import GRDB

/// Opening a SQLite database whose every commit is on the disk before it returns: the daemon's
/// counters that guard against guessing, the login server's sign counters. One way for both.
public enum DurablePool {
    /// A WAL pool at `path` with `synchronous=FULL`, read back (`what` names what would be lost, for
    /// the refusal), its files the owner's alone (0600: the WAL and its index hold the same rows).
    public static func open(
        path: String,
        configuration: Configuration = Configuration(),
        keeping what: String
    ) throws -> DatabasePool {
        let pool = try DatabasePool(path: path, configuration: configuration)
        // Set on the pool's one writing connection: GRDB sets NORMAL there when it turns on WAL,
        // after `prepareDatabase` ran.
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                throw DatabaseError(
                    message: "SQLite would not sync each commit (synchronous=FULL): refusing to keep \(what) there"
                )
            }
        }
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            chmod(path + suffix, 0o600)
        }
        return pool
    }
}
