import EnclaveProtocol

/// `handoff`: who may hand the daemon a descriptor on its handoff socket (`Handoff`): a terminal
/// for a prompt (the PAM module under sudo or pkexec, an app's `evaluatePolicy` in a terminal) or
/// a pipe for administration's secrets (`lactl … --stdin`). A client that may not is refused its
/// ticket at once, saying why; its prompts are drawn by the prompt agent or headless.
///
/// Our setting. Before Linux 6.16 the kernel cannot refuse descriptors a client sends unasked, and
/// it releases them with the connection, on the closing thread, where a file on the client's FUSE
/// mount can wait without end: a local user who may connect can then fill the handoff loop's
/// descriptor table, and nobody's terminal is taken until they let go (docs/architecture.md,
/// "Handing the terminal over"). Where only root may connect (the socket's file is 0600; a root
/// process needs CAP_DAC_OVERRIDE, or to own the file), nobody else can: root's own prompts —
/// sudo's and polkit's, which run as root — keep their terminal.
public enum HandoffSocketSetting: String, Sendable, CaseIterable {
    /// The default: every user's terminal prompts, on every kernel.
    case always
    /// Every user where the kernel refuses descriptors a connection has not been asked for
    /// (SO_PASSRIGHTS, Linux 6.16); root only elsewhere.
    case ifKernelRefuses = "if-kernel-refuses"
    /// Root only, on every kernel.
    case root
    case never

    /// Who may hand over, and why not everyone.
    public enum Access: Equatable, Sendable {
        case everyone
        case rootOnly(why: String)
        case nobody(why: String)
    }

    /// Who may hand the daemon a descriptor, given whether the kernel refuses descriptors sent
    /// unasked and the daemon's mode. A user-mode daemon's socket is its user's alone (0600)
    /// already, and sudo's and polkit's prompts are the system daemon's: root only would only
    /// refuse the user, so it is everyone there.
    public func access(kernelRefusesUnasked: Bool, mode: DaemonMode) -> Access {
        switch self {
        case .always: return .everyone
        case .ifKernelRefuses where mode == .user, .root where mode == .user: return .everyone
        case .ifKernelRefuses:
            return kernelRefusesUnasked
                ? .everyone
                : .rootOnly(
                    why:
                        "handoff = if-kernel-refuses, and this kernel cannot refuse descriptors sent unasked (SO_PASSRIGHTS: Linux 6.16)"
                )
        case .root: return .rootOnly(why: "handoff = root")
        case .never: return .nobody(why: "handoff = never")
        }
    }
}
