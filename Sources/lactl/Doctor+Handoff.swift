import CPeerSocket
import EnclaveClient
import EnclaveProtocol

#if canImport(Glibc)
import Glibc
#endif

extension Doctor {
    /// Whether the daemon takes a terminal or a pipe handed over (`handoff`), asked as a client
    /// asks — a ticket, voided when this connection closes — and whether this kernel lets a local
    /// user make that unavailable to others (before Linux 6.16: docs/configuration.md, `handoff`).
    func checkHandoff(_ connection: EnclaveConnection, mode: DaemonMode, into report: inout DoctorReport) {
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
            if Self.kernelRefusesUnaskedDescriptors {
                report.ok("handoff", "served: prompts may be drawn on an app's terminal")
            } else if mode == .system {
                report.note(
                    "handoff",
                    "served on a kernel that cannot refuse descriptors sent unasked (before Linux 6.16): a local user "
                        + "can make terminal prompts unavailable to others until they let go; where users are not "
                        + "trusted with that, set handoff = if-kernel-refuses (docs/configuration.md)"
                )
            } else {
                report.ok("handoff", "served: prompts may be drawn on this user's terminals")
            }
        case .failure(let failure):
            report.note(
                "handoff",
                "\(failure.message): prompts are drawn by the agent or headless, never on an app's terminal, "
                    + "and lactl … --stdin cannot hand its pipe over"
            )
        default:
            report.problem(
                "handoff",
                "the daemon answered \(reply) to a handoff",
                fix: "use a laenclaved of the same version as lactl"
            )
        }
    }

    /// Whether this kernel refuses descriptors sent on a connection before they are asked for
    /// (SO_PASSRIGHTS, Linux 6.16): asked of a socket of our own.
    static var kernelRefusesUnaskedDescriptors: Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        return la_take_descriptors(probe, 0) == 0
    }
}
