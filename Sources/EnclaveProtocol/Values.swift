import Foundation

/// The protocol version a client announces in `hello`. A daemon answers any other value with
/// `unsupportedVersion` and closes.
public let enclaveProtocolVersion = 1

/// Apple's `LAError.Code` raw values, as they travel on the wire. The client maps them back to
/// `LAError`; the daemon never invents codes outside this list.
public enum LAErrorCode: Int, Codable, Sendable, CaseIterable {
    case authenticationFailed = -1
    case userCancel = -2
    case userFallback = -3
    case systemCancel = -4
    case passcodeNotSet = -5
    case biometryNotAvailable = -6
    case biometryNotEnrolled = -7
    case biometryLockout = -8
    case appCancel = -9
    case invalidContext = -10
    case companionNotAvailable = -11
    case biometryNotPaired = -12
    case biometryDisconnected = -13
    case invalidDimensions = -14
    case notInteractive = -1004
}

/// `LAPolicy` raw values. Values outside this list are rejected with `invalidParameter`.
public enum PolicyValue: Int, Codable, Sendable, CaseIterable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithCompanion = 3
    case deviceOwnerAuthenticationWithBiometricsOrCompanion = 4
    case deviceOwnerAuthenticationWithWristDetection = 5

    public var name: String {
        switch self {
        case .deviceOwnerAuthenticationWithBiometrics: return "deviceOwnerAuthenticationWithBiometrics"
        case .deviceOwnerAuthentication: return "deviceOwnerAuthentication"
        case .deviceOwnerAuthenticationWithCompanion: return "deviceOwnerAuthenticationWithCompanion"
        case .deviceOwnerAuthenticationWithBiometricsOrCompanion:
            return "deviceOwnerAuthenticationWithBiometricsOrCompanion"
        case .deviceOwnerAuthenticationWithWristDetection: return "deviceOwnerAuthenticationWithWristDetection"
        }
    }
}

/// `LABiometryType` raw values.
public enum BiometryKind: Int, Codable, Sendable, CaseIterable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4

    public var displayName: String {
        switch self {
        case .none: return "none"
        case .touchID: return "Touch ID"
        case .faceID: return "Face ID"
        case .opticID: return "Optic ID"
        }
    }
}

public enum DaemonMode: String, Codable, Sendable {
    case user, system
}

/// What a (simulated) person does. A script queues these ahead of time; the running evaluation
/// takes them in order and discards, with a log line, any that does not apply at that moment
/// (a touch while the sensor is not armed, a fallback before the button is shown).
public struct SimulatedEvent: Codable, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// A finger or face that matches an enrolled identity.
        case match
        /// A finger or face that matches none.
        case nomatch
        case cancel
        case fallback
        /// Face ID's "Try Face ID Again" button.
        case retry
        /// The device passcode typed on the prompt's keyboard.
        case passcode
    }
    public var kind: Kind
    public var passcode: String?

    public init(_ kind: Kind, passcode: String? = nil) {
        self.kind = kind
        self.passcode = passcode
    }

    public static let match = SimulatedEvent(.match)
    public static let nomatch = SimulatedEvent(.nomatch)
    public static let cancel = SimulatedEvent(.cancel)
    public static let fallback = SimulatedEvent(.fallback)
    public static let retry = SimulatedEvent(.retry)
    public static func passcode(_ value: String) -> SimulatedEvent { SimulatedEvent(.passcode, passcode: value) }

    public var description: String { kind == .passcode ? "passcode(••••)" : kind.rawValue }
}

/// What the person does on a prompt that a client presents (the terminal presenter).
/// One screen of the authentication prompt, sent by the daemon whenever it changes.
public struct PromptScreen: Codable, Sendable, Equatable {
    public var app: String
    public var reason: String
    /// The line that tells the person what to do now ("Touch ID: place your finger…", "Try Again").
    public var instruction: String
    public var cancelTitle: String
    /// Present only while the fallback button is shown.
    public var fallbackTitle: String?
    /// Whether typing the device passcode is accepted now.
    public var passcodeEntry: Bool
    /// Face ID's "Try Face ID Again" button.
    public var retryOffered: Bool
    public var sensorArmed: Bool
    public var sensorName: String?
    public var sensorSimulated: Bool
    /// Seconds until another passcode attempt is accepted, while a delay runs.
    public var passcodeRetryAfter: Double?
    public var passcodeDisabled: Bool
    /// A line the prompt must show where nobody misses it: the daemon accepts scripted input on a
    /// real reader (our addition; absent otherwise).
    public var warning: String?
    /// The daemon asks the person to allow administration (the reason says what), not to confirm
    /// who they are for the app: the prompt's heading says so, so no app's evaluation can dress up
    /// as one (our addition; absent otherwise).
    public var administration: Bool?
    /// What is typed when `passcodeEntry`: "password" where it is the login password (a PAM
    /// authentication); absent for the device passcode (our addition).
    public var secretName: String?

    public init(
        app: String,
        reason: String,
        instruction: String,
        cancelTitle: String,
        fallbackTitle: String?,
        passcodeEntry: Bool,
        retryOffered: Bool,
        sensorArmed: Bool,
        sensorName: String?,
        sensorSimulated: Bool,
        passcodeRetryAfter: Double?,
        passcodeDisabled: Bool
    ) {
        self.app = app
        self.reason = reason
        self.instruction = instruction
        self.cancelTitle = cancelTitle
        self.fallbackTitle = fallbackTitle
        self.passcodeEntry = passcodeEntry
        self.retryOffered = retryOffered
        self.sensorArmed = sensorArmed
        self.sensorName = sensorName
        self.sensorSimulated = sensorSimulated
        self.passcodeRetryAfter = passcodeRetryAfter
        self.passcodeDisabled = passcodeDisabled
    }
}

extension PromptScreen {
    /// What the app asks, after its name on every presenter: administration reads apart from an
    /// evaluation.
    public var heading: String {
        administration == true ? "asks for your permission (laenclaved administration)" : "wants to confirm it is you"
    }
}

public struct SensorInfo: Codable, Sendable, Equatable {
    public var kind: BiometryKind
    public var name: String
    public var simulated: Bool
    public init(kind: BiometryKind, name: String, simulated: Bool) {
        self.kind = kind
        self.name = name
        self.simulated = simulated
    }
}

/// What the daemon's master secret is rooted in (our addition, issue 31): sealed to a TPM 2.0 (a
/// copied state opens nothing without that TPM), or the key file alone.
public enum MasterSecretRoot: String, Codable, Sendable {
    case tpm
    case software
}

/// Everything `lactl status` shows about the calling user. Never a template, verifier or secret.
public struct UserStatus: Codable, Sendable, Equatable {
    public var uid: UInt32
    public var mode: DaemonMode
    public var app: String
    public var sensor: SensorInfo?
    /// How many identities are enrolled. Their names are the person's, not any app's (our rule):
    /// `enrolments` gives them, with the passcode.
    public var enrolledCount: Int
    public var passcodeSet: Bool
    public var biometricFailures: Int
    /// Why biometrics are refused right now, if they are: "failures", "boot", "inactivity", "remoteLock".
    public var biometryLockout: String?
    public var passcodeFailures: Int
    public var passcodeRetryAfter: Double?
    public var passcodeDisabled: Bool
    public var queuedEvents: Int
    /// The calling app's domain-state hash; nil when nothing is enrolled.
    public var domainState: Data?
    public var simulationEnabled: Bool
    /// Whether the calling app's own authentication prompt is open now. Another app's prompt is not
    /// reported: which app asks the person, and when, is not any other app's business (our rule).
    public var promptOpen: Bool
    /// Characters a new passcode needs, and whether the one set is shorter (known once it has
    /// been set or checked under the rule; nil otherwise, and with PAM).
    public var passcodeMinimumLength: Int?
    public var passcodeShorterThanMinimum: Bool?
    /// When (seconds since 1970) the daemon last found the enrolled set changed outside it
    /// (fprintd-enroll, a desktop's settings): such a change skipped the passcode rule.
    public var enrolmentChangedElsewhereAt: Double?
    /// Whether a graphical prompt agent serves the caller's session: its prompts are drawn there
    /// (our addition).
    public var promptAgent: Bool?
    /// What the daemon's master secret is rooted in: "tpm" (sealed to the machine's TPM 2.0: a
    /// copied state opens nothing elsewhere) or "software" (the key file alone); our addition.
    public var root: MasterSecretRoot?
    /// Why passcode checks and biometrics are refused for every user: a TPM-root state older than
    /// its rollback counter (a copy put back), or the counter gone; root's recovery lifts it. Our
    /// addition.
    public var stateRefused: String?

    public init(
        uid: UInt32,
        mode: DaemonMode,
        app: String,
        sensor: SensorInfo?,
        enrolledCount: Int,
        passcodeSet: Bool,
        biometricFailures: Int,
        biometryLockout: String?,
        passcodeFailures: Int,
        passcodeRetryAfter: Double?,
        passcodeDisabled: Bool,
        queuedEvents: Int,
        domainState: Data?,
        simulationEnabled: Bool,
        promptOpen: Bool = false,
        passcodeMinimumLength: Int? = nil,
        passcodeShorterThanMinimum: Bool? = nil,
        enrolmentChangedElsewhereAt: Double? = nil,
        promptAgent: Bool? = nil,
        stateRefused: String? = nil
    ) {
        self.stateRefused = stateRefused
        self.promptAgent = promptAgent
        self.passcodeMinimumLength = passcodeMinimumLength
        self.passcodeShorterThanMinimum = passcodeShorterThanMinimum
        self.enrolmentChangedElsewhereAt = enrolmentChangedElsewhereAt
        self.uid = uid
        self.mode = mode
        self.app = app
        self.sensor = sensor
        self.enrolledCount = enrolledCount
        self.passcodeSet = passcodeSet
        self.biometricFailures = biometricFailures
        self.biometryLockout = biometryLockout
        self.passcodeFailures = passcodeFailures
        self.passcodeRetryAfter = passcodeRetryAfter
        self.passcodeDisabled = passcodeDisabled
        self.queuedEvents = queuedEvents
        self.domainState = domainState
        self.simulationEnabled = simulationEnabled
        self.promptOpen = promptOpen
    }
}

public struct AuditEntry: Codable, Sendable, Equatable {
    public var time: Date
    public var uid: UInt32
    public var pid: Int32
    public var app: String
    public var operation: String
    public var policy: Int?
    public var result: String
    public init(time: Date, uid: UInt32, pid: Int32, app: String, operation: String, policy: Int?, result: String) {
        self.time = time
        self.uid = uid
        self.pid = pid
        self.app = app
        self.operation = operation
        self.policy = policy
        self.result = result
    }
}

/// One step of an enrolment on a real reader: "stage 3 of 5, lift and touch again".
public struct EnrolmentProgress: Codable, Sendable, Equatable {
    /// Stages passed so far.
    public var stage: Int
    public var stages: Int
    public var message: String
    public init(stage: Int, stages: Int, message: String) {
        self.stage = stage
        self.stages = stages
        self.message = message
    }
}
