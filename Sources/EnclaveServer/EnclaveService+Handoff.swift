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
        let access = daemon.config.handoff.access(
            kernelRefusesUnasked: la_kernel_refuses_unasked_descriptors() == 1,
            mode: daemon.config.mode
        )
        let rootOnly: Bool
        switch access {
        case .everyone: rootOnly = false
        case .rootOnly: rootOnly = true
        case .nobody(let why):
            // systemd's copy stays: a drop-in without the socket's ListenStream= removes it
            // (docs/configuration.md, `handoff`).
            if let passed { close(passed.descriptor) }
            logger.notice("no handoff socket: prompts are not shown on an app's terminal", metadata: ["why": "\(why)"])
            daemon.handoff.serve(access)
            return nil
        }
        guard let server = openHandoff(passed: passed, socketPath: socketPath, rootOnly: rootOnly) else { return nil }
        // Said before the loop runs: a loop that fails later says so itself, and stays said.
        daemon.handoff.serve(access)
        guard server.start() else {
            daemon.handoff.serve(.nobody(why: "its handoff socket's loop could not start (see the daemon's log)"))
            logger.warning("no handoff socket: its loop could not start; prompts cannot be shown on an app's terminal")
            return nil
        }
        if case .rootOnly(let why) = access {
            logger.notice("the handoff socket takes root's handoffs only", metadata: ["why": "\(why)"])
        }
        return server
    }

    /// The handoff socket's server, its listener made root's only when `rootOnly`, not yet started;
    /// nil (and the registry told why) when there is none.
    private func openHandoff(passed: SocketActivation.Listener?, socketPath: String, rootOnly: Bool) -> HandoffServer? {
        let listener: Int32
        let path: String?
        if let passed {
            // Root's only: nobody else may connect from now (root with CAP_DAC_OVERRIDE passes
            // any mode). Others may have connected while systemd held the socket alone (from
            // boot, or its restart, to this start): at most its backlog (the unit's Backlog=),
            // each answered at once (`HandoffServer`) and closed in its user's turn.
            if rootOnly, chmod(passed.path, 0o600) != 0 {
                let why = "its socket \(passed.path) could not be made root's only: \(String(cString: strerror(errno)))"
                close(passed.descriptor)
                logger.error("no handoff socket", metadata: ["why": "\(why)"])
                daemon.handoff.serve(.nobody(why: why))
                return nil
            }
            (listener, path) = (passed.descriptor, nil)
        } else {
            let bound = EnclavePaths.handoffSocket(for: socketPath)
            do {
                let mode: mode_t = daemon.config.mode == .system && !rootOnly ? 0o666 : 0o600
                listener = try HandoffServer.bind(path: bound, mode: mode)
                path = bound
            } catch {
                logger.warning(
                    "no handoff socket: prompts cannot be shown on an app's terminal",
                    metadata: ["path": "\(bound)", "error": "\(error)"]
                )
                daemon.handoff.serve(.nobody(why: "its handoff socket could not be bound (see the daemon's log)"))
                return nil
            }
        }
        return HandoffServer(
            listener: listener,
            path: path,
            rootOnly: rootOnly,
            registry: daemon.handoff,
            logger: logger
        )
    }
}
