import CPeerSocket
import EnclaveClient
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension Doctor {
    /// Whether the daemon takes a terminal or a pipe handed over (`handoff`), asked as a client
    /// asks — a ticket, voided when this connection closes — and whether this kernel lets a local
    /// user make that unavailable to others (before Linux 6.16: docs/configuration.md, `handoff`).
    func checkHandoff(
        _ connection: EnclaveConnection,
        mode: DaemonMode,
        socketPath: String,
        into report: inout DoctorReport
    ) {
        let reply: Reply
        do { reply = try connection.request(.handoff(.init(kind: .terminal))) } catch {
            return report.problem(
                "handoff",
                "the daemon did not answer: \(error)",
                fix: "journalctl -u laenclaved (or the user daemon's log) says what the daemon did"
            )
        }
        switch reply {
        case .handoffTicket:
            // Who may connect is what counts: the socket file's mode says it (nil: not read).
            var socketFile = stat()
            let othersConnect: Bool? =
                stat(EnclavePaths.handoffSocket(for: socketPath), &socketFile) == 0
                ? socketFile.st_mode & 0o002 != 0 : nil
            if mode == .system, othersConnect == false {
                report.ok("handoff", "served to root only (sudo's and polkit's prompts keep their terminal)")
            } else if la_kernel_refuses_unasked_descriptors() == 1 {
                report.ok("handoff", "served: prompts may be drawn on an app's terminal")
            } else if mode == .system {
                report.note(
                    "handoff",
                    "served to every user on a kernel that cannot refuse descriptors sent unasked (before Linux "
                        + "6.16): a local user can make terminal prompts unavailable to others until they let go; "
                        + "where users are not trusted with that, set handoff = if-kernel-refuses (root's prompts "
                        + "only: sudo, polkit) (docs/configuration.md)"
                )
            } else {
                report.ok("handoff", "served: prompts may be drawn on this user's terminals")
            }
        case .failure(let failure) where failure.message.hasPrefix(Handoff.refusedToAllButRoot):
            report.note(
                "handoff",
                "\(failure.message): root's prompts (sudo, polkit) are drawn on their terminal; this user's by the "
                    + "agent or headless, and administration asks through the agent only"
            )
        case .failure(let failure):
            report.note(
                "handoff",
                "\(failure.message): prompts are drawn by the agent or headless, never on an app's terminal; "
                    + "administration asks through the agent only (lactl … --stdin cannot hand its pipe over)"
            )
            let handoff = EnclavePaths.handoffSocket(for: socketPath)
            if FileManager.default.fileExists(atPath: handoff) {
                report.note(
                    "handoff",
                    "\(handoff) is still there, where nobody takes what is sent: systemd holds it for the socket "
                        + "unit (a drop-in laenclaved.socket.d/*.conf with ListenStream= and then only the daemon's "
                        + "socket removes it: docs/configuration.md, handoff), or a daemon that ended left it"
                )
            }
        default:
            report.problem(
                "handoff",
                "the daemon answered \(reply) to a handoff",
                fix: "use a laenclaved of the same version as lactl"
            )
        }
    }
}
