/// A descriptor a client hands the daemon on the handoff socket (SCM_RIGHTS), so that the daemon,
/// not the app, talks to the person.
public enum HandedDescriptor: String, Codable, Sendable, CaseIterable {
    /// The client's controlling terminal: the daemon draws the prompt and reads the keys itself,
    /// as sudo does; the app learns only the outcome.
    case terminal
    /// A pipe the daemon reads secrets from, one per line, for administration without a terminal
    /// (`lactl … --stdin`, provisioning, the testing kit): never a request's field. Only a pipe:
    /// a file's read and close may wait on a program (a FUSE server), a pipe's never; the client
    /// library passes a file's lines through a pipe of its own (`handOverSecretInput`).
    case secretInput
}

/// The handoff socket's one exchange. Why a second socket: the daemon's connections are read by
/// SwiftNIO, which reads stream sockets without ancillary data (the kernel then drops a passed
/// descriptor); the handoff socket is read with `recvmsg` by a small loop of its own.
///
/// 1. On its connection the client asks `handoff(kind:)` and gets a ticket of `ticketBytes` random
///    bytes, valid for `ticketLifetime` seconds, for one descriptor, for that connection only.
/// 2. It connects to `EnclavePaths.handoffSocket(for:)` and reads one byte: `ready`, or a
///    `HandoffStatus` (`busy`) and the end. Until `ready`, the connection takes no descriptor (a
///    `sendmsg` carrying one fails, where the kernel can refuse it: Linux 6.16).
/// 3. On `ready`, it sends the ticket's bytes with the descriptor attached, in one `sendmsg`.
/// 4. The daemon checks that the kernel's peer (SO_PEERCRED) is the process that asked, and the
///    descriptor's kind, then answers one `HandoffStatus` byte and closes.
///
/// A client and a daemon from before `ready` (2026-11-30) do not agree: a new client waits for a
/// `ready` an old daemon never says (it answers `malformed` after `exchangeTimeout`); an old
/// client's descriptor is refused by a new daemon's kernel (Linux 6.16), or taken while the
/// client reads `ready` as a refusal. The handoff fails, and the prompt is drawn without the
/// terminal (both may, in the last case).
public enum Handoff {
    /// The daemon's first byte when it will take the ticket and its descriptor (no `HandoffStatus`).
    public static let ready: UInt8 = 0x80
    public static let ticketBytes = 16
    public static let ticketLifetime: Double = 10
    /// How long the daemon waits for a ticket after the connect.
    public static let exchangeTimeout: Double = 2
    /// How a refused ticket begins, by who may hand over (the daemon's `handoff` setting): nobody,
    /// or root only. The reason follows after a colon.
    public static let refusedToEveryone = "this daemon takes no handoffs"
    public static let refusedToAllButRoot = "this daemon takes handoffs from root only"
}

public enum HandoffStatus: UInt8, Error, Sendable, CaseIterable, CustomStringConvertible {
    case accepted = 0
    /// Never issued, already used, expired, or its connection has closed.
    case unknownTicket = 1
    /// The ticket was issued to another process (or user).
    case wrongProcess = 2
    /// `terminal` was asked for, and the descriptor is not a terminal.
    case notATerminal = 3
    case noDescriptor = 4
    case malformed = 5
    /// Too many handoffs of this user are waiting, or descriptors of theirs being closed.
    case busy = 6
    /// `secretInput` was asked for, and the descriptor is not a pipe.
    case notAPipe = 7
    /// A terminal, but not the controlling terminal of the process that hands it.
    case notTheControllingTerminal = 8
    /// The daemon takes root's handoffs only (`handoff = root`, or `if-kernel-refuses` on a kernel
    /// that cannot refuse descriptors sent unasked). A client before it reads "status 9".
    case rootOnly = 9

    public var description: String {
        switch self {
        case .accepted: return "accepted"
        case .unknownTicket: return "the handoff ticket is unknown, used or expired"
        case .wrongProcess: return "the handoff ticket belongs to another process"
        case .notATerminal: return "the handed descriptor is not a terminal"
        case .noDescriptor: return "no descriptor came with the handoff ticket"
        case .malformed: return "the handoff message is not a ticket"
        case .busy: return "too many handoffs of this user are under way"
        case .notAPipe: return "the handed secret input is not a pipe"
        case .notTheControllingTerminal:
            return "the handed terminal is not the controlling terminal of the process that hands it"
        case .rootOnly: return "the daemon takes handoffs from root only"
        }
    }
}
