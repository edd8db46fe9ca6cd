/// `handoff`: when the daemon serves its handoff socket (`Handoff`), on which a client hands over
/// its terminal for a prompt (the PAM module's sudo, an app's `evaluatePolicy` in a terminal) or a
/// pipe for administration's secrets (`lactl … --stdin`). Without it every prompt is drawn by the
/// prompt agent or headless, and a handoff ticket is refused at once, saying why.
///
/// Our setting. Before Linux 6.16 the kernel cannot refuse descriptors a client sends unasked, and
/// the kernel releases them with the connection, on the closing thread, where a file on the
/// client's FUSE mount can wait without end: a local user can then fill the handoff loop's
/// descriptor table, and nobody's terminal is taken until they let go (docs/architecture.md,
/// "Handing the terminal over"). A machine whose local users are not trusted with each other's
/// terminal prompts runs `if-kernel-refuses` (or `never`) there.
public enum HandoffSocketSetting: String, Sendable, CaseIterable {
    /// The default: terminal prompts work on every kernel.
    case always
    /// Only where the kernel refuses descriptors a connection has not been asked for
    /// (SO_PASSRIGHTS, Linux 6.16).
    case ifKernelRefuses = "if-kernel-refuses"
    case never

    /// Whether the daemon serves the handoff socket, given whether the kernel refuses descriptors
    /// sent unasked on it.
    public func serves(kernelRefusesUnasked: Bool) -> Bool {
        switch self {
        case .always: return true
        case .ifKernelRefuses: return kernelRefusesUnasked
        case .never: return false
        }
    }

    /// Why a daemon serves no handoff socket under this setting, for its log and its refusals.
    public func whyNone(kernelRefusesUnasked: Bool) -> String? {
        guard !serves(kernelRefusesUnasked: kernelRefusesUnasked) else { return nil }
        switch self {
        case .never: return "handoff = never"
        default:
            return
                "handoff = if-kernel-refuses, and this kernel cannot refuse descriptors sent unasked (SO_PASSRIGHTS: Linux 6.16)"
        }
    }
}
