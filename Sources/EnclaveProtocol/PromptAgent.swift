/// The graphical prompt agent's side of the protocol. The agent (`laenclaved-agent`, started by the
/// person's graphical session) asks `servePrompts` once; the daemon admits it only when the kernel
/// says the connection is the installed agent's executable, then sends it an `agentEvent` for each
/// screen of a prompt of an app in the agent's session, and the agent answers each with
/// `promptAction`. Apps never see these: the passcode goes from the agent's window to the daemon.

/// What the person did on the agent's prompt window.
public struct PromptAction: Codable, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// The window is on screen (the agent answers every first screen with it: an agent that
        /// does not is dropped, and the prompt goes to the next presenter).
        case shown
        /// The device passcode, typed in the window (`passcode` holds it).
        case passcode
        case cancel, fallback, retry
        /// A scripted touch, offered only while a simulated sensor is armed.
        case simulatedMatch, simulatedNoMatch
    }

    public var kind: Kind
    public var passcode: String?

    public init(_ kind: Kind, passcode: String? = nil) {
        self.kind = kind
        self.passcode = passcode
    }

    public static func typed(_ passcode: String) -> PromptAction { PromptAction(.passcode, passcode: passcode) }

    /// Never the passcode itself.
    public var description: String { kind == .passcode ? "passcode(••••)" : kind.rawValue }
}

/// One message to the agent: it serves its seat now (the first, prompt 0), show a prompt's
/// screen (a new prompt, or the next screen of one it shows), or close the prompt with its outcome.
public struct AgentEvent: Codable, Sendable, Equatable {
    /// The prompt, numbered by the daemon for this agent from 1.
    public var prompt: UInt64
    public var screen: PromptScreen?
    /// The prompt's outcome, when it ends ("authenticated", "Canceled by user."…).
    public var closed: String?
    /// The first event: the seat (user and session) whose prompts the agent draws.
    public var serving: String?

    public init(prompt: UInt64, screen: PromptScreen? = nil, closed: String? = nil, serving: String? = nil) {
        self.prompt = prompt
        self.screen = screen
        self.closed = closed
        self.serving = serving
    }

    public static func show(_ prompt: UInt64, _ screen: PromptScreen) -> AgentEvent {
        AgentEvent(prompt: prompt, screen: screen)
    }
    public static func close(_ prompt: UInt64, result: String) -> AgentEvent {
        AgentEvent(prompt: prompt, closed: result)
    }
}
