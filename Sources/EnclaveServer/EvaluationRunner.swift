import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging

struct EvaluationReport: Sendable {
    var outcome: EvaluationMachine.Outcome
    var biometryType: BiometryKind
    var domainState: Data?
    /// The audit entry was written in the same transaction as the record the evaluation changed.
    var audited = false
}

/// One evaluation's shell: performs what `EvaluationMachine` asks for — screens, the sensor, passcode
/// checks, saving the ledger — and feeds it what happens. Every step runs on the user's
/// `UserSession` (the `isolated` parameter), so the ledger it changes has one owner.
struct EvaluationRunner {
    var policy: PolicyValue
    var passcodeOnly: Bool
    var options: EvaluationOptions
    var app: String
    var authorization: ContextAuthorization?
    var inputs: AsyncStream<SessionInput>
    var continuation: AsyncStream<SessionInput>.Continuation
    /// Where sensor captures run (the connection's event loop): a reading then reaches the
    /// evaluation without waking another thread.
    var captureExecutor: (any TaskExecutor)?
    var show: @Sendable (PromptScreen) -> Void
    var audit: @Sendable (EvaluationMachine.Outcome) -> AuditEntry
    /// The end of the request the evaluation serves: its wait for the user's prompt reads it.
    var end: RequestEnd
    /// What a typed passcode is (a PAM authentication's: the login password), and how long the
    /// request may wait for its prompt and keep it open, from its start (nil: the daemon's
    /// `promptQueueTimeout`, then `promptTimeout`).
    var secret = EvaluationMachine.Secret.devicePasscode
    var promptTimeout: Double?

    private var machine: EvaluationMachine?
    /// A ledger change not yet durable. It is saved just before the next thing the client could
    /// see or the next suspension — a prompt screen, a passcode check, waiting for input — or with
    /// the answer, then together with the evaluation's audit entry in one durable transaction.
    private var unsaved = false
    private var audited = false
    private var capture: Task<Void, Never>?
    private var lastScreen: PromptScreen?
    /// The running capture's number, nil while the sensor is disarmed.
    private var currentCapture: UInt64?
    private var capturesStarted: UInt64 = 0
    /// A touch this evaluation placed lies on the sensor, unread (at most one: a sensor reads one
    /// finger at a time). The script's next event waits for its reading, so the person's actions
    /// reach the evaluation in the order they were scripted.
    private var touchOnSensor = false

    init(
        policy: PolicyValue,
        passcodeOnly: Bool,
        options: EvaluationOptions,
        app: String,
        authorization: ContextAuthorization?,
        inputs: AsyncStream<SessionInput>,
        continuation: AsyncStream<SessionInput>.Continuation,
        captureExecutor: (any TaskExecutor)? = nil,
        show: @escaping @Sendable (PromptScreen) -> Void,
        audit: @escaping @Sendable (EvaluationMachine.Outcome) -> AuditEntry,
        end: RequestEnd
    ) {
        self.policy = policy
        self.passcodeOnly = passcodeOnly
        self.options = options
        self.app = app
        self.authorization = authorization
        self.inputs = inputs
        self.continuation = continuation
        self.captureExecutor = captureExecutor
        self.show = show
        self.audit = audit
        self.end = end
    }

    mutating func run(on session: isolated UserSession) async -> EvaluationReport {
        do {
            var actions = try await start(on: session)
            if let machine, machine.isFinished, case .finish(let o)? = actions.last {
                return await report(o, on: session)
            }

            // The prompt is needed: one per user at a time.
            // A prompt timeout of the request's own (PAM) counts from its arrival, the wait included.
            let arrived = ContinuousClock.now
            let turn = await session.acquirePrompt(
                timeout: min(session.config.promptQueueTimeout, promptTimeout ?? .infinity),
                until: end
            )
            guard turn != .gaveUp else {
                if end.hasEnded || Task.isCancelled {
                    return await report(session.stopping.endingOutcome(), on: session)
                }
                return await report(
                    .failure(.systemCancel, "Another authentication prompt for this user took too long."),
                    on: session
                )
            }
            defer { session.releasePrompt() }
            if end.hasEnded || Task.isCancelled {
                return await report(session.stopping.endingOutcome("The context was invalidated."), on: session)
            }
            // Facts may have changed while waiting: start afresh. (A free prompt was taken without
            // a suspension, so nothing changed since the start.)
            if turn == .afterWaiting { actions = try await start(on: session) }
            session.activeInputs = continuation
            session.activePromptApp = app
            defer {
                session.activeInputs = nil
                session.activePromptApp = nil
            }
            let waited = arrived.duration(to: .now) / .seconds(1)
            let open = promptTimeout.map { max(0.5, $0 - waited) } ?? session.config.promptTimeout
            let timeout = Deadline(after: open) { [continuation] in
                continuation.yield(.machine(.systemCancel("The prompt timed out (\(Int(open.rounded())) s).")))
            }
            defer { timeout.cancel() }
            defer { disarm(on: session) }

            if let outcome = await perform(actions, on: session) { return await report(outcome, on: session) }
            if let outcome = await followScript(on: session) { return await report(outcome, on: session) }
            for await input in inputs {
                if let outcome = await handle(input, on: session) { return await report(outcome, on: session) }
                if let outcome = await followScript(on: session) { return await report(outcome, on: session) }
            }
            // The input stream ended: the client went away or invalidated the context, or the daemon stops.
            _ = feedMachine(session.stopping.endingInput, on: session)
            return await report(session.stopping.endingOutcome(), on: session)
        } catch {
            session.logger.error("evaluation failed", metadata: ["uid": "\(session.uid)", "error": "\(error)"])
            _ = await save(finishing: nil, on: session)
            return EvaluationReport(
                outcome: .failure(.systemCancel, "The enclave could not evaluate: \(error)"),
                biometryType: session.sensorKind,
                domainState: nil
            )
        }
    }

    private mutating func start(on session: isolated UserSession) async throws -> [EvaluationMachine.Action] {
        var facts = try await session.facts()
        // The login password is always there: it plays the passcode Apple's rules ask for.
        if secret == .loginPassword { facts.passcodeSet = true }
        var configuration = EvaluationMachine.Configuration(
            policy: policy,
            facts: facts,
            app: app,
            reason: options.reason,
            cancelTitle: options.cancelTitle,
            fallbackTitle: options.fallbackTitle,
            reuseDuration: options.reuseDuration,
            interactionNotAllowed: options.interactionNotAllowed,
            sensorSimulated: session.sensor?.info.simulated ?? false,
            contextAuthorization: authorization,
            contextLifetime: session.config.contextLifetime
        )
        configuration.passcodeOnly = passcodeOnly
        configuration.secret = secret
        configuration.scriptedInputOnRealSensor = session.config.scriptedInputOnRealSensor
        var machine = EvaluationMachine(configuration)
        let actions = machine.start(
            ledger: session.record.ledger,
            now: session.clock.monotonic(),
            wall: session.clock.wall()
        )
        self.machine = machine
        return actions
    }

    private mutating func handle(
        _ input: SessionInput,
        on session: isolated UserSession
    ) async -> EvaluationMachine.Outcome? {
        switch input {
        case .machine(let i):
            return await feed(i, on: session)
        case .simulatedAvailable:
            // `followScript` takes them after every input.
            return nil
        case .touch(let reading):
            if touchOnSensor {
                session.logger.debug(
                    "ignored input",
                    metadata: ["uid": "\(session.uid)", "why": "a touch while another lies on the sensor unread"]
                )
                return nil
            }
            if place(reading, on: session) { return nil }
            return await feed(Self.machineInput(for: reading), on: session)
        case .sensor(let reading, let number):
            guard number == currentCapture else { return nil }
            touchOnSensor = false
            let outcome = await feed(Self.machineInput(for: reading), on: session)
            // The reading ended that capture; a sensor still armed reads again.
            if outcome == nil, machine?.isSensorArmed == true { arm(on: session) }
            return outcome
        case .sensorRetry(let message, let number):
            guard number == currentCapture else { return nil }
            // Not an attempt: the person sees why and scans again; the sensor stays armed.
            session.logger.info(
                "sensor asks to scan again",
                metadata: ["uid": "\(session.uid)", "message": "\(message)"]
            )
            if var screen = lastScreen {
                screen.instruction = "\(screen.sensorName ?? "Sensor"): \(message)"
                show(screen)
            }
            return nil
        case .sensorFailed(let message, let number):
            guard number == currentCapture else { return nil }
            return await feed(.systemCancel("The sensor failed: \(message)"), on: session)
        }
    }

    /// The scripted person's next actions, in order, until the script is empty or a touch waits
    /// on the sensor to be read. A touch goes to a sensor that can be touched (the simulated one)
    /// while it is armed; otherwise — not armed, or a real reader with scripted input allowed — to
    /// the machine, which decides whether it applies.
    private mutating func followScript(on session: isolated UserSession) async -> EvaluationMachine.Outcome? {
        while !touchOnSensor, let event = session.takeQueuedEvent() {
            if let reading = event.touch, place(reading, on: session) { return nil }
            if let outcome = await feed(Self.machineInput(for: event), on: session) { return outcome }
        }
        return nil
    }

    /// Puts a touch on the user's sensor for the armed capture to read; false when the sensor
    /// cannot be touched or is not armed.
    private mutating func place(_ reading: SensorReading, on session: isolated UserSession) -> Bool {
        guard let sensor = session.sensor as? any TouchableSensor, machine?.isSensorArmed == true,
            currentCapture != nil,
            sensor.place(reading, uid: session.uid)
        else { return false }
        touchOnSensor = true
        return true
    }

    private mutating func feed(
        _ input: EvaluationMachine.Input,
        on session: isolated UserSession
    ) async -> EvaluationMachine.Outcome? {
        await perform(feedMachine(input, on: session), on: session)
    }

    private mutating func feedMachine(
        _ input: EvaluationMachine.Input,
        on session: isolated UserSession
    ) -> [EvaluationMachine.Action] {
        guard var machine else { return [] }
        let actions = machine.handle(
            input,
            ledger: &session.record.ledger,
            now: session.clock.monotonic(),
            wall: session.clock.wall()
        )
        self.machine = machine
        return actions
    }

    private mutating func perform(
        _ actions: [EvaluationMachine.Action],
        on session: isolated UserSession
    ) async -> EvaluationMachine.Outcome? {
        let unsavable = EvaluationMachine.Outcome.failure(.systemCancel, "The enclave could not save its state.")
        // A passcode check's answer puts the machine's next actions in front of the rest.
        var pending = actions[...]
        while let action = pending.popFirst() {
            switch action {
            case .persistLedger:
                unsaved = true
            case .armSensor:
                arm(on: session)
            case .disarmSensor:
                disarm(on: session)
            case .show(let screen):
                guard await save(finishing: nil, on: session) else { return unsavable }
                lastScreen = screen
                show(screen)
            case .checkPasscode(let passcode):
                // The check suspends, and other requests must not see an unsaved change.
                guard await save(finishing: nil, on: session) else { return unsavable }
                let result = await check(passcode, on: session)
                pending = feedMachine(result, on: session)[...] + pending
            case .ignored(let why):
                session.logger.debug("ignored input", metadata: ["uid": "\(session.uid)", "why": "\(why)"])
            case .finish(let outcome):
                return outcome
            }
        }
        // The evaluation now waits for input: nothing unsaved may outlive this batch.
        guard await save(finishing: nil, on: session) else { return unsavable }
        return nil
    }

    /// A sensor reads once per capture: (re)arm it whenever the machine wants it armed.
    private mutating func arm(on session: isolated UserSession) {
        guard let sensor = session.sensor else { return }
        capture?.cancel()
        capturesStarted += 1
        let number = capturesStarted
        currentCapture = number
        capture = Task(executorPreference: captureExecutor) {
            [uid = session.uid, logger = session.logger, continuation] in
            do {
                let reading = try await sensor.capture(
                    uid: uid,
                    retry: { continuation.yield(.sensorRetry($0, capture: number)) }
                )
                continuation.yield(.sensor(reading, capture: number))
            } catch {
                if !Task.isCancelled {
                    logger.warning("sensor failed", metadata: ["uid": "\(uid)", "error": "\(error)"])
                    continuation.yield(.sensorFailed("\(error)", capture: number))
                }
            }
        }
    }

    /// No more readings: the capture stops and a real reader is let go.
    private mutating func disarm(on session: isolated UserSession) {
        capture?.cancel()
        capture = nil
        currentCapture = nil
        // A touch left unread is gone with the capture; the script goes on.
        touchOnSensor = false
        session.sensor?.disarm(uid: session.uid)
    }

    private mutating func save(
        finishing outcome: EvaluationMachine.Outcome?,
        on session: isolated UserSession
    ) async -> Bool {
        guard unsaved else { return true }
        do {
            try await session.persist(audit: outcome.map { [audit($0)] } ?? [])
            unsaved = false
            audited = outcome != nil
            return true
        } catch {
            return false
        }
    }

    private mutating func report(
        _ outcome: EvaluationMachine.Outcome,
        on session: isolated UserSession
    ) async -> EvaluationReport {
        var outcome = outcome
        if !(await save(finishing: outcome, on: session)) {
            outcome = .failure(.systemCancel, "The enclave could not save its state.")
        }
        var state: Data?
        if case .success(let how) = outcome,
            policy == .deviceOwnerAuthenticationWithBiometrics || how == .biometric || how == .reused
        {
            // A finger matched now: the enrolled set as it is now (one may have been added while
            // the prompt was open, and an app compares domain states to notice exactly that).
            state = how == .biometric ? try? await session.domainState(app: app) : session.recordedDomainState(app: app)
        }
        return EvaluationReport(
            outcome: outcome,
            biometryType: session.sensorKind,
            domainState: state,
            audited: audited
        )
    }

    static func machineInput(for reading: SensorReading) -> EvaluationMachine.Input {
        switch reading {
        case .match: return .match
        case .noMatch: return .noMatch
        }
    }

    static func machineInput(for event: SimulatedEvent) -> EvaluationMachine.Input {
        switch event.kind {
        case .match, .nomatch: return machineInput(for: event.touch ?? .noMatch)
        case .cancel: return .cancel
        case .fallback: return .fallback
        case .retry: return .retry
        case .passcode: return .passcodeTyped(event.passcode ?? "")
        }
    }
}
