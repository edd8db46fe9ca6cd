import ServiceLifecycle

/// The handoff socket (`HandoffServer`, on a thread of its own) as a service of the daemon's
/// group: it serves from before the daemon's socket is ready until the daemon's socket has
/// stopped, then its loop ends and its socket goes.
struct HandoffService: Service {
    let server: HandoffServer

    func run() async {
        // Cancelled (another service failed) ends it the same way.
        try? await gracefulShutdown()
        server.stop()
    }
}

/// The audit log's group commit as a service: entries still waiting for their commit are written
/// once the daemon's socket has stopped — so nothing adds another — before the process exits.
struct AuditLogService: Service {
    let log: AuditLog

    func run() async {
        try? await gracefulShutdown()
        log.flush()
    }
}
