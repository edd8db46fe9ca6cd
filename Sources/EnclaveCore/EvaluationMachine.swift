import EnclaveProtocol
import Foundation

/// One `evaluatePolicy`, as a state machine: it takes what happens (a touch, a button, a typed
/// passcode, a cancellation) and returns what the shell must do, in order. It never performs I/O;
/// every change to the ledger is followed by `.persistLedger`, which the shell must complete
/// before it performs any later action (answers leave the daemon only after counters are durable).
public struct EvaluationMachine: Sendable {
    public struct Configuration: Sendable {
        public var policy: PolicyValue
        public var facts: DeviceFacts
        public var app: String
        public var reason: String
        public var cancelTitle: String?
        public var fallbackTitle: String?
        public var reuseDuration: Double
        public var interactionNotAllowed: Bool
        public var sensorSimulated: Bool
        public var contextAuthorization: ContextAuthorization?
        public var contextLifetime: Double
        /// Only the device passcode proves presence (keychain items with `devicePasscode`):
        /// biometrics are not offered and a biometric authorization or reuse does not count.
        /// Meaningful with `.deviceOwnerAuthentication`.
        public var passcodeOnly = false
        /// The sensor is a real reader and the daemon accepts scripted input anyway (simulation
        /// turned on by name): every screen says so.
        public var scriptedInputOnRealSensor = false
        /// What the person types when a passcode is taken: the device passcode, or (a PAM
        /// authentication: `PAMAuthenticationRules`) their login password, which the shell checks
        /// and counts on its own counter (`PasswordAttempts`) and answers `.loginPasswordChecked`.
        public var secret = Secret.devicePasscode

        public init(
            policy: PolicyValue,
            facts: DeviceFacts,
            app: String,
            reason: String,
            cancelTitle: String? = nil,
            fallbackTitle: String? = nil,
            reuseDuration: Double = 0,
            interactionNotAllowed: Bool = false,
            sensorSimulated: Bool = true,
            contextAuthorization: ContextAuthorization? = nil,
            contextLifetime: Double = ContextAuthorization.defaultLifetime
        ) {
            self.policy = policy
            self.facts = facts
            self.app = app
            self.reason = reason
            self.cancelTitle = cancelTitle
            self.fallbackTitle = fallbackTitle
            self.reuseDuration = reuseDuration
            self.interactionNotAllowed = interactionNotAllowed
            self.sensorSimulated = sensorSimulated
            self.contextAuthorization = contextAuthorization
            self.contextLifetime = contextLifetime
        }
    }

    public enum Input: Sendable, Equatable, CustomStringConvertible {
        case match, noMatch, cancel, fallback, retry
        case passcodeTyped(String)
        /// The shell's answer to `.checkPasscode`: whether it matched, and the verifier output of the attempt.
        case passcodeChecked(correct: Bool, attempt: Data?)
        case loginPasswordChecked(LoginPasswordCheck)
        case appCancel
        case systemCancel(String)

        /// Never shows a passcode: inputs end up in log lines.
        public var description: String {
            switch self {
            case .match: return "match"
            case .noMatch: return "noMatch"
            case .cancel: return "cancel"
            case .fallback: return "fallback"
            case .retry: return "retry"
            case .passcodeTyped: return "passcodeTyped(••••)"
            case .passcodeChecked(let correct, _): return "passcodeChecked(correct: \(correct))"
            case .loginPasswordChecked(let check): return "loginPasswordChecked(\(check))"
            case .appCancel: return "appCancel"
            case .systemCancel(let why): return "systemCancel(\(why))"
            }
        }
    }

    public enum SuccessKind: Sendable, Equatable {
        case biometric, passcode, reused, contextAuthorized
    }

    public enum Outcome: Sendable, Equatable {
        case success(SuccessKind)
        case failure(LAErrorCode, String)
    }

    public enum Action: Sendable, Equatable {
        case persistLedger
        case armSensor
        case disarmSensor
        case show(PromptScreen)
        /// Verify this passcode (memory-hard, in the shell) and feed back `.passcodeChecked`.
        case checkPasscode(String)
        /// An input that does not apply now; the shell logs it.
        case ignored(String)
        case finish(Outcome)
    }

    enum Phase: Equatable { case notStarted, biometric, faceRetryOffered, faceExhausted, passcode, finished }

    public let configuration: Configuration
    private(set) var phase: Phase = .notStarted
    private var sensorArmed = false
    private var failuresThisEvaluation = 0
    private var passcodeMessage: String?
    /// The login password's delay as its last check said (`Secret.loginPassword`).
    private var loginPasswordDelay: Double?

    public init(_ configuration: Configuration) { self.configuration = configuration }

    public var isFinished: Bool { phase == .finished }
    public var isSensorArmed: Bool { sensorArmed }

    public static let touchIDAttemptsPerEvaluation = 3
    public static let faceIDAttemptsPerEvaluation = 2

    // MARK: Start

    public mutating func start(ledger: AttemptLedger, now: MonotonicStamp, wall: Date) -> [Action] {
        precondition(phase == .notStarted, "an evaluation starts once")
        let c = configuration
        if let (code, message) = Preflight.check(c.policy, facts: c.facts, ledger: ledger, wall: wall) {
            return finish(.failure(code, message))
        }
        if let auth = c.contextAuthorization,
            c.passcodeOnly
                ? auth.satisfiesPasscodeOnly(now: now, lifetime: c.contextLifetime)
                : auth.satisfies(c.policy, now: now, lifetime: c.contextLifetime)
        {
            return finish(.success(.contextAuthorized))
        }
        let biometricUsable =
            !c.passcodeOnly && c.facts.sensor != .none && c.facts.enrolled && ledger.biometryRefusal(now: wall) == nil
        if biometricUsable && ledger.allowsReuse(of: c.reuseDuration, now: now, app: c.app) {
            return finish(.success(.reused))
        }
        if c.interactionNotAllowed {
            return finish(.failure(.notInteractive, "User interaction is required."))
        }
        if c.policy == .deviceOwnerAuthenticationWithBiometrics || biometricUsable {
            phase = .biometric
            sensorArmed = true
            return [.armSensor, .show(screen(ledger: ledger, now: now))]
        }
        phase = .passcode
        return [.show(screen(ledger: ledger, now: now))]
    }

    // MARK: Inputs

    public mutating func handle(
        _ input: Input,
        ledger: inout AttemptLedger,
        now: MonotonicStamp,
        wall: Date
    ) -> [Action] {
        guard phase != .finished, phase != .notStarted else { return [.ignored("\(input) after the evaluation ended")] }
        switch input {
        case .appCancel: return finish(.failure(.appCancel, "Invalidated by client."))
        case .systemCancel(let why): return finish(.failure(.systemCancel, why))
        case .cancel: return finish(.failure(.userCancel, "Canceled by user."))
        case .match:
            // Only while the sensor is armed: after a Face ID failure it stays off until the user asks to retry.
            guard phase == .biometric else { return [.ignored("a matching touch while the sensor is not armed")] }
            if let refusal = ledger.biometryRefusal(now: wall) {
                return biometryRefused(refusal, ledger: ledger, now: now)
            }
            ledger.recordBiometricMatch(now: now, wall: wall, app: configuration.app)
            return [.persistLedger] + finish(.success(.biometric))
        case .noMatch:
            guard phase == .biometric else { return [.ignored("a non-matching touch while the sensor is not armed")] }
            if let refusal = ledger.biometryRefusal(now: wall) {
                return biometryRefused(refusal, ledger: ledger, now: now)
            }
            return biometricFailure(ledger: &ledger, now: now)
        case .retry:
            guard phase == .faceRetryOffered else { return [.ignored("retry while no retry is offered")] }
            phase = .biometric
            sensorArmed = true
            return [.armSensor, .show(screen(ledger: ledger, now: now))]
        case .fallback:
            guard fallbackVisible else { return [.ignored("fallback while the fallback button is hidden")] }
            if configuration.policy == .deviceOwnerAuthenticationWithBiometrics {
                return finish(.failure(.userFallback, "Fallback authentication mechanism selected."))
            }
            return toPasscode(ledger: ledger, now: now)
        case .passcodeTyped(let passcode):
            guard passcodeEntryAllowed else { return [.ignored("a passcode where this policy takes none")] }
            guard !passcode.isEmpty else { return [.ignored("an empty passcode")] }
            // The login password's counter and delays are the shell's.
            if configuration.secret == .loginPassword { return [.checkPasscode(passcode)] }
            guard PasscodeCheck.admit(passcodeSet: configuration.facts.passcodeSet, ledger: ledger, now: now) == nil
            else {
                passcodeMessage = nil
                return [.show(screen(ledger: ledger, now: now))]
            }
            return [.checkPasscode(passcode)]
        case .passcodeChecked(let correct, let attempt):
            guard passcodeEntryAllowed, configuration.secret == .devicePasscode else {
                return [.ignored("a passcode result where this policy takes none")]
            }
            if PasscodeCheck.record(correct: correct, attempt: attempt, ledger: &ledger, now: now, wall: wall)
                == .accepted
            {
                return [.persistLedger] + finish(.success(.passcode))
            }
            passcodeMessage = "Wrong passcode. Try again."
            return [.persistLedger, .show(screen(ledger: ledger, now: now))]
        case .loginPasswordChecked(let check):
            guard passcodeEntryAllowed, configuration.secret == .loginPassword else {
                return [.ignored("a login password result where this evaluation takes none")]
            }
            // Not the device passcode: it lifts no biometry lockout (our rule), and the ledger is
            // not the counter that counted it.
            switch check {
            case .accepted: return finish(.success(.passcode))
            case .wrong(let retryAfter):
                passcodeMessage = "Wrong password. Try again."
                loginPasswordDelay = retryAfter
            case .delayed(let seconds):
                passcodeMessage = "Password entry is delayed. Try again in \(Self.describe(seconds))"
                loginPasswordDelay = seconds
            }
            return [.show(screen(ledger: ledger, now: now))]
        }
    }

    // MARK: Rules

    private mutating func biometricFailure(ledger: inout AttemptLedger, now: MonotonicStamp) -> [Action] {
        failuresThisEvaluation += 1
        passcodeMessage = nil
        let lockedNow = ledger.recordBiometricFailure()
        var actions: [Action] = [.persistLedger]
        let biometricOnly = configuration.policy == .deviceOwnerAuthenticationWithBiometrics
        if lockedNow {
            if biometricOnly {
                return actions + finish(.failure(.biometryLockout, Preflight.lockoutMessage(.failures)))
            }
            return actions + toPasscode(ledger: ledger, now: now)
        }
        if configuration.facts.sensor == .faceID {
            if failuresThisEvaluation >= Self.faceIDAttemptsPerEvaluation {
                if !biometricOnly { return actions + toPasscode(ledger: ledger, now: now) }
                phase = .faceExhausted
            } else {
                phase = .faceRetryOffered
            }
            sensorArmed = false
            actions.append(.disarmSensor)
            actions.append(.show(screen(ledger: ledger, now: now)))
            return actions
        }
        if failuresThisEvaluation >= Self.touchIDAttemptsPerEvaluation {
            if biometricOnly {
                return actions + finish(.failure(.authenticationFailed, "Application retry limit exceeded."))
            }
            return actions + toPasscode(ledger: ledger, now: now)
        }
        actions.append(.show(screen(ledger: ledger, now: now)))
        return actions
    }

    /// Biometrics became refused while the prompt was open (a remote lock, another app's fifth
    /// failure): a touch no longer counts either way.
    private mutating func biometryRefused(
        _ reason: BiometryLockReason,
        ledger: AttemptLedger,
        now: MonotonicStamp
    ) -> [Action] {
        if configuration.policy == .deviceOwnerAuthenticationWithBiometrics {
            return finish(.failure(.biometryLockout, Preflight.lockoutMessage(reason)))
        }
        return toPasscode(ledger: ledger, now: now)
    }

    private mutating func toPasscode(ledger: AttemptLedger, now: MonotonicStamp) -> [Action] {
        var actions: [Action] = []
        if sensorArmed {
            actions.append(.disarmSensor)
            sensorArmed = false
        }
        phase = .passcode
        passcodeMessage = nil
        actions.append(.show(screen(ledger: ledger, now: now)))
        return actions
    }

    private mutating func finish(_ outcome: Outcome) -> [Action] {
        var actions: [Action] = []
        if sensorArmed {
            actions.append(.disarmSensor)
            sensorArmed = false
        }
        phase = .finished
        actions.append(.finish(outcome))
        return actions
    }

    private var passcodeEntryAllowed: Bool { configuration.policy == .deviceOwnerAuthentication }

    /// Touch ID shows the fallback button after the first failure; Face ID after the second.
    /// An empty fallback title hides it; the passcode phase has none.
    var fallbackVisible: Bool {
        guard configuration.fallbackTitle != "" else { return false }
        switch phase {
        case .biometric: return configuration.facts.sensor == .touchID && failuresThisEvaluation >= 1
        case .faceExhausted: return true
        default: return false
        }
    }

    // MARK: The prompt

    func screen(ledger: AttemptLedger, now: MonotonicStamp) -> PromptScreen {
        let c = configuration
        let sensorName = c.facts.sensor == .none ? nil : c.facts.sensor.displayName
        var retryAfter: Double?
        var disabled = false
        var instruction: String
        switch phase {
        case .biometric:
            if c.facts.sensor == .faceID {
                instruction = "Face ID: look at the camera"
            } else {
                instruction =
                    failuresThisEvaluation == 0
                    ? "Touch ID: place your finger on the sensor" : "Touch ID: no match. Try Again"
            }
            if passcodeEntryAllowed {
                instruction =
                    passcodeMessage.map { "\($0) — or use \(c.facts.sensor.displayName)" } ?? instruction
                    + (c.secret == .loginPassword ? " — or type your password" : " — or type the device passcode")
            }
        case .faceRetryOffered: instruction = "Face Not Recognized"
        case .faceExhausted: instruction = "Face Not Recognized. Face ID will not be tried again for this request"
        default:
            instruction =
                passcodeMessage ?? (c.secret == .loginPassword ? "Enter your password" : "Enter the device passcode")
        }
        if passcodeEntryAllowed && c.secret == .loginPassword {
            retryAfter = loginPasswordDelay
        } else if passcodeEntryAllowed {
            switch ledger.passcodeGate(now: now) {
            case .open: break
            case .wait(let seconds):
                retryAfter = seconds
                if phase == .passcode {
                    instruction = "Passcode entry is delayed. Try again in \(Self.describe(seconds))"
                }
            case .disabled:
                disabled = true
                if phase == .passcode {
                    instruction =
                        "Passcode entry is disabled until an administrator resets it (lactl admin reset-passcode)"
                }
            }
        }
        var screen = PromptScreen(
            app: c.app,
            reason: c.reason,
            instruction: instruction,
            cancelTitle: (c.cancelTitle?.isEmpty ?? true) ? "Cancel" : c.cancelTitle!,
            fallbackTitle: fallbackVisible
                ? ((c.fallbackTitle?.isEmpty ?? true) ? "Enter Password" : c.fallbackTitle!) : nil,
            passcodeEntry: passcodeEntryAllowed && !disabled,
            retryOffered: phase == .faceRetryOffered,
            sensorArmed: sensorArmed,
            sensorName: sensorName,
            sensorSimulated: c.sensorSimulated,
            passcodeRetryAfter: retryAfter,
            passcodeDisabled: disabled
        )
        if c.scriptedInputOnRealSensor { screen.warning = Self.scriptedInputWarning }
        if c.secret == .loginPassword { screen.secretName = "password" }
        return screen
    }

    public static let scriptedInputWarning =
        "⚠ SIMULATION IS ON: scripted touches and passcodes (lactl simulate) pass this real reader's prompt"

    static func describe(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        if s >= 3600 { return "\(s / 3600) h \(s % 3600 / 60) min" }
        if s >= 60 { return "\(s / 60) min \(s % 60) s" }
        return "\(s) s"
    }
}
