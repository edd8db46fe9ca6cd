import ArgumentParser
import EnclaveCore
import EnclaveServer
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon asks of its own process at start: where its agent is, how many descriptors.
extension LAEnclaved {
    /// `laenclaved-agent` in the directory this executable runs from (as the kernel names it, links
    /// resolved, as it names the agent's): installed together, the agent needs no setting.
    static func agentBesideDaemon() -> String? {
        guard let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        return (me as NSString).deletingLastPathComponent + "/laenclaved-agent"
    }

    /// Raises the soft descriptor limit toward `wanted` (up to the hard limit); returns the limit now.
    static func raiseDescriptorLimit(to wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return wanted }
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}

/// Root's one-shots on a stopped daemon's state (`--reanchor`, `--recover-tpm-root`,
/// `--issue-tpm-recovery`, `--move-to-tpm`).
extension LAEnclaved {
    /// The one-shot asked for, if any; refused unless run as the state's owner (files written as
    /// another user, root included, would lock the daemon out of its own state).
    func oneShotFlag(config: DaemonConfiguration) throws -> String? {
        let asked = [
            (config.reanchor, "--reanchor"), (recoverTPMRoot, "--recover-tpm-root"),
            (issueTPMRecovery, "--issue-tpm-recovery"), (moveToTPM, "--move-to-tpm"),
        ].filter(\.0).map(\.1)
        guard let flag = asked.first else { return nil }
        guard asked.count == 1 else { throw ValidationError("one of \(asked.joined(separator: ", ")) at a time") }
        var state = stat()
        guard stat(config.stateDirectory, &state) == 0 else {
            throw ValidationError(
                "\(flag): there is no state in \(config.stateDirectory) (the daemon's --system, --state-dir?)"
            )
        }
        if state.st_uid != geteuid() {
            throw ValidationError(
                "\(flag): \(config.stateDirectory) belongs to uid \(state.st_uid): run it as that user (runuser -u …)"
            )
        }
        return flag
    }

    /// The recovery secret from standard input: typed without echo at a terminal, else read.
    static func readRecoverySecret() -> String {
        if isatty(0) == 1, let typed = getpass("recovery secret: ") { return String(cString: typed) }
        return readLine(strippingNewline: true) ?? ""
    }

    /// The one-shot's last step, once the daemon's state opened whole.
    func finish(_ oneShot: String, daemon: EnclaveDaemon, logger: Logger) throws {
        guard issueTPMRecovery || moveToTPM else { return logger.notice("\(oneShot): done; exiting") }
        try daemon.issueRecoverySecret { secret in
            // Shown, or not issued: a write that failed keeps the secret issued before.
            do { try FileHandle.standardOutput.write(contentsOf: Data((secret + "\n").utf8)) } catch {
                throw ValidationError(
                    "\(oneShot): the secret could not be shown (\(error)); the one before stays"
                )
            }
        }
        logger.notice(
            "\(oneShot): a recovery secret was issued, shown on standard output only: keep it off this machine; any issued before no longer opens the state"
        )
    }
}
