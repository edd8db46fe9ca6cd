import EnclaveCore
import EnclaveProtocol
import Foundation

/// Where administration gets the person's passcode: asked by the daemon on the trusted prompt,
/// which says what is being allowed — the graphical agent of the app's session, else the terminal
/// the client handed over — or read from the pipe a script handed (`lactl … --stdin`), where root
/// or the daemon's starter allowed it (`AdminPolicy.pipeGivesThePasscode`: provisioning, the
/// testing kit). Never from a request: a passcode typed into an app is a passcode the app knows.
struct PersonSecrets {
    let descriptors: HandedDescriptors
    /// The verified identity of the app that asks, as the prompt shows it.
    let app: String
    /// What the person allows (`AdminPolicy.purpose`).
    let purpose: String
    /// The user's session: its prompt slot is taken while the terminal prompt is up (one prompt
    /// per user, evaluations included, so two prompts never share a terminal), and its
    /// configuration says how long the prompt waits.
    let session: UserSession
    /// Registers what runs when the connection closes: the prompt ends at once (its client went away).
    let whenClosed: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// The prompt agent of the app's session, if one serves it (it comes before the terminal).
    let agent: PromptAgent?
    /// Whether a handed pipe may give the passcode here (`AdminPolicy.pipeGivesThePasscode`).
    let pipeAllowed: Bool
    /// The programs trusted to hold the other side of the handed terminal (`TerminalHolders`).
    let terminalHolders: Set<String>
    /// Who reads which processes hold that other side.
    let holderReader: PtyMasterHolders.Reader
    /// Why this client may hand the daemon no terminal (`HandoffRegistry.refusal(for:)`), when it
    /// may not.
    var noHandoff: String? = nil

    static let clientWentAway = DaemonError(.notPermitted, "the app went away before its prompt")

    static let nobodyToAsk = DaemonError(
        .notPermitted,
        "this needs the person: run it in a terminal or a graphical session with the prompt agent (the daemon asks there)"
    )

    /// Nobody to ask where this client can hand the daemon no terminal at all (`refusal`).
    static func nobodyToAsk(noHandoff refusal: String) -> DaemonError {
        DaemonError(
            .notPermitted,
            "this needs the person, and nobody can be asked here: no prompt agent serves this session, and the "
                + "daemon cannot ask on a terminal: \(refusal)"
        )
    }

    /// The handed pipe, where it may give the passcode; a pipe handed where it may not is refused,
    /// not passed over for the prompt (the person did not ask for a prompt).
    private var pipe: SecretLines? {
        get throws {
            guard let lines = descriptors.secretInput else { return nil }
            guard pipeAllowed else { throw AdminPolicy.pipeRefusal }
            return lines
        }
    }

    /// The device passcode, to allow `purpose`.
    func passcode() async throws -> String {
        if let lines = try pipe { return try await lines.next("device passcode") }
        return try await onTrustedPrompt(["Enter the device passcode to allow it"])[0]
    }

    /// The user's login password (a PAM service checks it), to allow `purpose`.
    func loginPassword() async throws -> String {
        if let lines = try pipe { return try await lines.next("login password") }
        return try await onTrustedPrompt(["Enter your login password to allow it"])[0]
    }

    /// The current passcode, then a new one (asked twice on the terminal).
    func currentAndNewPasscode() async throws -> (current: String, new: String) {
        if let lines = try pipe {
            return (
                try await lines.next("current passcode"), try await lines.next("new passcode")
            )
        }
        let answers = try await onTrustedPrompt([
            "Enter the current passcode", "Choose the new passcode", "Enter the new passcode again",
        ])
        guard answers[1] == answers[2] else { throw DaemonError(.invalidParameter, "the new passcodes differ") }
        return (answers[0], answers[1])
    }

    /// A new passcode (asked twice on the terminal).
    func newPasscode() async throws -> String {
        if let lines = try pipe { return try await lines.next("new passcode") }
        let answers = try await onTrustedPrompt(["Choose the new passcode", "Enter it again"])
        guard answers[0] == answers[1] else { throw DaemonError(.invalidParameter, "the passcodes differ") }
        return answers[0]
    }

    /// Whether the handed terminal is the person's (`TerminalHolders`): nil when none was handed.
    private func terminalVerdict() async throws -> TerminalHolders.Verdict? {
        guard let handed = descriptors.terminal else { return nil }
        let listed = terminalHolders
        let reader = holderReader
        return try await BlockingWork.waiting {
            let holders = TerminalHolders.ptyIndex(handed.device).map { reader.holders(index: $0) } ?? []
            // The listed programs as this daemon's namespace has them, by file.
            let trusted = Set(listed.compactMap { PeerProcess.fileID(AT_FDCWD, $0) })
            return TerminalHolders.decide(
                handed.device,
                onTheMachinesPseudoTerminals: handed.onTheMachinesPseudoTerminals,
                holders: holders,
                trusted: trusted
            )
        }
    }

    /// One trusted prompt with a screen per answer.
    private func onTrustedPrompt(_ instructions: [String]) async throws -> [String] {
        guard agent != nil || descriptors.terminal != nil else {
            throw noHandoff.map { Self.nobodyToAsk(noHandoff: $0) } ?? Self.nobodyToAsk
        }
        // The terminal is judged inside the user's prompt slot: one scan of /proc at a time per
        // user, so however many requests one user sends, a system daemon's helper (which also pins
        // every user's connections) is held for one scan of theirs at a time.
        let clientGone = RequestEnd()
        whenClosed { clientGone.end() }
        guard await session.acquirePrompt(timeout: session.config.promptQueueTimeout, until: clientGone) != .gaveUp
        else {
            if clientGone.hasEnded { throw Self.clientWentAway }
            throw DaemonError(.busy, "another prompt of this user took too long")
        }
        // The turn came as the client went: the prompt is not shown for nobody.
        if clientGone.hasEnded {
            await session.releasePrompt()
            throw Self.clientWentAway
        }
        do {
            let verdict = try await terminalVerdict()
            if agent == nil, case .refused(let why)? = verdict {
                throw DaemonError(
                    .notPermitted,
                    why
                        + ": run lactl in your own terminal (an emulator, tmux, screen or ssh) or answer the prompt agent"
                )
            }
            let answers = try await ask(
                instructions,
                terminalIsThePersons: verdict.map { if case .refused = $0 { false } else { true } } ?? false
            )
            await session.releasePrompt()
            return answers
        } catch {
            await session.releasePrompt()
            throw error
        }
    }

    /// `terminalIsThePersons`: the handed terminal may take over when the agent is lost.
    private func ask(_ instructions: [String], terminalIsThePersons: Bool) async throws -> [String] {
        let (actions, feed) = AsyncStream<PromptKeyboard.Action?>.makeStream()
        defer { feed.finish() }
        let timeout = session.config.promptTimeout
        // The agent of the app's session, else (also when the agent is lost) the handed terminal.
        let (descriptors, session) = (self.descriptors, self.session)
        let prompt = PromptRoute.starting(
            on: agent,
            onAction: { feed.yield($0) },
            then: {
                guard terminalIsThePersons else { return nil }
                return TerminalPrompt.on(
                    descriptors,
                    for: session,
                    onAction: { feed.yield($0) },
                    onLost: { feed.yield(nil) }
                )
            },
            exhausted: { feed.yield(nil) }
        )
        let timer = Deadline(after: timeout) { feed.yield(.cancel) }
        defer { timer.cancel() }
        whenClosed { feed.yield(nil) }
        var answers: [String] = []
        var iterator = actions.makeAsyncIterator()
        for instruction in instructions {
            prompt.show(screen(instruction))
            waiting: while true {
                switch await iterator.next() {
                case .passcode(let p)??:
                    answers.append(p)
                    break waiting
                case .cancel??, .escape??:
                    await prompt.close(result: "not allowed")
                    throw DaemonError(.notPermitted, "the person did not allow it")
                case .some(nil), nil:
                    await prompt.close(result: "ended: the terminal closed, the agent went away, or the app went away")
                    throw DaemonError(
                        .notPermitted,
                        "the prompt ended: its terminal closed, its agent went away, or the app went away"
                    )
                default:
                    continue
                }
            }
        }
        await prompt.close(result: "entered")
        return answers
    }

    private func screen(_ instruction: String) -> PromptScreen {
        var screen = PromptScreen(
            app: app,
            reason: "Allow it to " + purpose,
            instruction: instruction,
            cancelTitle: "Do Not Allow",
            fallbackTitle: nil,
            passcodeEntry: true,
            retryOffered: false,
            sensorArmed: false,
            sensorName: nil,
            sensorSimulated: false,
            passcodeRetryAfter: nil,
            passcodeDisabled: false
        )
        screen.administration = true
        return screen
    }
}
