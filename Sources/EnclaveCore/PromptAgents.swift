import EnclaveProtocol

/// Where a process sits for the prompt: its user, and its logind session as the kernel's cgroup
/// record says (`LoginSession`, as `sd_pid_get_session` reads it; nil outside any session — a systemd user service, an app
/// a modern desktop starts under `user@UID.service`, a container). A process cannot move itself
/// into or out of a session: the session's scope belongs to root.
public struct PromptSeat: Hashable, Sendable, CustomStringConvertible {
    public var uid: UInt32
    public var session: String?
    public init(uid: UInt32, session: String?) {
        self.uid = uid
        self.session = session
    }
    public var description: String { "uid \(uid), session \(session ?? "none")" }
}

/// The graphical prompt agents serving the daemon's users: which agent draws the prompts of which
/// seat, and who may be one. Pure; the shell keeps one and holds the connections.
///
/// Our rules: an agent serves the seat it runs in (its user and logind session), and draws the
/// prompts of the apps in that seat only — an app in another session of the same user (ssh, a
/// second login) gets its terminal, or a headless prompt. Processes outside any session share one
/// seat per user (the user unit's agent serves them; docs/architecture.md says who they are). One agent per seat: a second is refused
/// while the first serves (an agent that stops answering is dropped by the shell, which frees the
/// seat). Only the installed agent executable, as the kernel names it, may serve (`admits`).
public struct PromptAgents<Agent: Sendable>: Sendable {
    public enum Registration: Equatable, Sendable {
        case registered
        case refused(String)
    }

    private var bySeat: [PromptSeat: (connection: UInt64, agent: Agent)] = [:]

    public init() {}

    /// Whether `identity` is the prompt agent: the configured executable, verified by path in the
    /// daemon's own view (an unverified or interpreter identity never is: anything could run as it).
    public static func admits(_ identity: AppIdentity, agentPath: String?) -> Bool {
        guard let agentPath, !agentPath.isEmpty else { return false }
        return identity.kind == .app && identity.name == agentPath
    }

    /// `agent` (of `connection`) offers to serve `seat`.
    public mutating func register(_ agent: Agent, connection: UInt64, seat: PromptSeat) -> Registration {
        if let present = bySeat[seat] {
            return present.connection == connection
                ? .refused("this connection already serves the prompts of its session")
                : .refused("another prompt agent serves this session (\(seat))")
        }
        bySeat[seat] = (connection, agent)
        return .registered
    }

    /// The agent of `connection` stops serving (its connection closed, or it stopped answering).
    public mutating func remove(connection: UInt64) {
        for (seat, entry) in bySeat where entry.connection == connection { bySeat[seat] = nil }
    }

    public func agent(for seat: PromptSeat) -> Agent? { bySeat[seat]?.agent }
}

extension PromptKeyboard {
    /// What an agent's answer means to the prompt on `screen`, by the keyboard's own rules: nil
    /// when the screen does not offer it (a fallback not shown, a scripted touch without a
    /// simulated sensor armed, a passcode while none is accepted, an empty or overlong one).
    /// `shown` is not the person's: the shell takes it before.
    public static func action(for answer: PromptAction, on screen: PromptScreen?) -> Action? {
        guard let screen else { return nil }
        switch answer.kind {
        case .shown: return nil
        case .cancel: return offered(.cancel, on: screen)
        case .fallback: return offered(.fallback, on: screen)
        case .retry: return offered(.retry, on: screen)
        case .simulatedMatch: return offered(.simulatedMatch, on: screen)
        case .simulatedNoMatch: return offered(.simulatedNoMatch, on: screen)
        case .passcode: return answer.passcode.flatMap { offered(.passcode($0), on: screen) }
        }
    }

}
