import GRDB

extension DatabasePool {
    /// Reads in one deferred transaction: every statement of `body` sees the same snapshot, and
    /// SQLite takes its lock on the WAL index once for them all (two `fcntl` calls), where each
    /// statement in a transaction of its own takes it again. Its `BEGIN` and `COMMIT` are kept
    /// compiled on the reader, where GRDB's `read` prepares both on every call. (GRDB's schema
    /// check before `body` still reads in a transaction of its own.)
    public func readSnapshot<T>(_ body: (Database) throws -> T) throws -> T {
        try unsafeRead { db in
            try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
            defer {
                // A read transaction ends without writing anything; should COMMIT fail, the
                // reader is still left out of its transaction for whoever takes it next. (Should
                // ROLLBACK fail too, GRDB stops the process rather than hand on an open snapshot.)
                if (try? db.cachedStatement(sql: "COMMIT TRANSACTION").execute()) == nil {
                    try? db.execute(sql: "ROLLBACK TRANSACTION")
                }
            }
            return try body(db)
        }
    }
}
