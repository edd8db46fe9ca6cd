import EnclaveProtocol
import Foundation
import LocalAuthentication

extension TestEnclave {
    /// What the scripted person does at the next prompt.
    public struct Event: Sendable, Equatable {
        let simulated: SimulatedEvent

        /// An enrolled finger or face.
        public static let match = Event(simulated: SimulatedEvent(.match))
        /// Someone else's finger or face: a failed attempt.
        public static let nomatch = Event(simulated: SimulatedEvent(.nomatch))
        /// The Cancel button.
        public static let cancel = Event(simulated: SimulatedEvent(.cancel))
        /// The fallback button ("Enter Password").
        public static let fallback = Event(simulated: SimulatedEvent(.fallback))
        /// "Try Face ID Again".
        public static let retry = Event(simulated: SimulatedEvent(.retry))
        /// The device passcode, typed.
        public static func passcode(_ passcode: String) -> Event { Event(simulated: SimulatedEvent.passcode(passcode)) }
    }

    /// The user's state as the daemon reports it.
    public struct Status: Sendable, Equatable {
        public struct Sensor: Sendable, Equatable {
            public var name: String
            public var biometryType: LABiometryType
            public var simulated: Bool
        }

        public var uid: UInt32
        public var systemMode: Bool
        /// The app identity the daemon sees for the caller.
        public var app: String
        public var sensor: Sensor?
        /// How many identities are enrolled (their names: `TestEnclave.enrolments`).
        public var enrolledCount: Int
        public var passcodeSet: Bool
        public var biometricFailures: Int
        /// Why biometrics are refused right now, if they are: "failures", "boot", "inactivity", "remoteLock".
        public var biometryLockout: String?
        public var passcodeFailures: Int
        /// Seconds until the passcode may be tried again, while a delay runs.
        public var passcodeRetryAfter: Double?
        public var passcodeDisabled: Bool
        public var queuedEvents: Int
        /// The calling app's `domainState.biometry.stateHash`; nil when nothing is enrolled.
        public var domainState: Data?
        public var simulationEnabled: Bool
        /// Whether an authentication prompt is open for this user now.
        public var promptOpen: Bool
        /// When the daemon last found the enrolment changed outside it (fprintd-enroll…), if ever.
        public var enrolmentChangedElsewhereAt: Date?
        /// Whether a graphical prompt agent draws the caller's prompts (`laenclaved-agent`).
        public var promptAgent: Bool
        /// Why passcode checks and biometrics are refused for every user: a TPM-root state older
        /// than its rollback counter, or the counter gone. nil when they are not.
        public var stateRefused: String?

        init(_ s: UserStatus) {
            uid = s.uid
            systemMode = s.mode == .system
            app = s.app
            sensor = s.sensor.map {
                Sensor(
                    name: $0.name,
                    biometryType: LABiometryType(rawValue: $0.kind.rawValue) ?? .none,
                    simulated: $0.simulated
                )
            }
            enrolledCount = s.enrolledCount
            passcodeSet = s.passcodeSet
            biometricFailures = s.biometricFailures
            biometryLockout = s.biometryLockout
            passcodeFailures = s.passcodeFailures
            passcodeRetryAfter = s.passcodeRetryAfter
            passcodeDisabled = s.passcodeDisabled
            queuedEvents = s.queuedEvents
            domainState = s.domainState
            simulationEnabled = s.simulationEnabled
            promptOpen = s.promptOpen
            enrolmentChangedElsewhereAt = s.enrolmentChangedElsewhereAt.map(Date.init(timeIntervalSince1970:))
            promptAgent = s.promptAgent ?? false
            stateRefused = s.stateRefused
        }
    }
}
