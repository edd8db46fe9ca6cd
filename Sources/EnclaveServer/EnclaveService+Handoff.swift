import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension EnclaveService {
    /// The handoff socket beside the daemon's (`Handoff`): systemd's when the unit passes it, else
    /// bound here, open to whom the `handoff` setting lets hand over on this kernel
    /// (`HandoffSocketSetting.Access`). Whoever may not is refused a ticket, saying why, and their
    /// prompts are drawn by the agent or headless; the daemon still serves.
    func startHandoff(passed: SocketActivation.Listener?, socketPath: String) -> HandoffServer? {
        let (server, access) = openHandoff(passed: passed, socketPath: socketPath)
        daemon.handoff.serve(access)
        return server
    }

    private func openHandoff(
        passed: SocketActivation.Listener?,
        socketPath: String
    ) -> (HandoffServer?, HandoffSocketSetting.Access) {
        let access = daemon.config.handoff.access(kernelRefusesUnasked: la_kernel_refuses_unasked_descriptors() == 1)
        let rootOnly: Bool
        switch access {
        case .everyone: rootOnly = false
        case .rootOnly: rootOnly = true
        case .nobody(let why):
            // systemd's copy stays: a drop-in without the socket's ListenStream= removes it
            // (docs/configuration.md, `handoff`).
            if let passed { close(passed.descriptor) }
            logger.notice("no handoff socket: prompts are not shown on an app's terminal", metadata: ["why": "\(why)"])
            return (nil, access)
        }
        let listener: Int32
        let path: String?
        if let passed {
            // Root's only: nobody else may connect from now (root passes any mode). What others
            // queued before, while systemd held the socket alone, is looked at (`HandoffServer`).
            if rootOnly, chmod(passed.path, 0o600) != 0 {
                let why = "its socket \(passed.path) could not be made root's only: \(String(cString: strerror(errno)))"
                close(passed.descriptor)
                logger.error("no handoff socket", metadata: ["why": "\(why)"])
                return (nil, .nobody(why: why))
            }
            (listener, path) = (passed.descriptor, nil)
        } else {
            let bound = EnclavePaths.handoffSocket(for: socketPath)
            do {
                let everyone: mode_t = daemon.config.mode == .system && !rootOnly ? 0o666 : 0o600
                listener = try HandoffServer.bind(path: bound, mode: everyone)
                path = bound
            } catch {
                logger.warning(
                    "no handoff socket: prompts cannot be shown on an app's terminal",
                    metadata: ["path": "\(bound)", "error": "\(error)"]
                )
                return (nil, .nobody(why: "its handoff socket could not be bound (see the daemon's log)"))
            }
        }
        let server = HandoffServer(
            listener: listener,
            path: path,
            rootOnly: rootOnly,
            registry: daemon.handoff,
            logger: logger
        )
        guard server.start() else {
            logger.warning("no handoff socket: its loop could not start; prompts cannot be shown on an app's terminal")
            return (nil, .nobody(why: "its handoff socket's loop could not start (see the daemon's log)"))
        }
        if case .rootOnly(let why) = access {
            logger.notice("the handoff socket takes root's handoffs only", metadata: ["why": "\(why)"])
        }
        return (server, access)
    }
}
