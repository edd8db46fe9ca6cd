import Foundation

/// What the client remembers between launches (the persisted facts of the flow).
public struct LoginFacts: Codable, Equatable, Sendable {
    public var loggedInBefore = false
    public var fingerprintEnabled = false
    /// The person said no to "Enable fingerprint login?": not asked again unless something changed.
    public var declinedFingerprint = false
    public var username: String?
    public init() {}
}

/// Why the fingerprint path did not log in.
public enum FingerprintProblem: Equatable, Sendable {
    case cancelled
    /// The sensor did not recognise the finger (three tries on the prompt).
    case notRecognised
    case lockedOut
    /// The enrolled fingers changed since fingerprint login was enabled (domain state differs).
    case enrolmentChanged
    /// The key was made with biometryCurrentSet and the enrolment changed: it is dead forever.
    case keyInvalidated
    /// The server no longer knows this device (revoked on another device or by the user).
    case deviceRevoked
    case unavailable(String)
    case server(String)

    public var explanation: String {
        switch self {
        case .cancelled: return "Fingerprint login was cancelled."
        case .notRecognised: return "The fingerprint was not recognised."
        case .lockedOut:
            return
                "Fingerprint is locked after too many tries; unlock it with the device passcode (lactl authenticate --policy deviceOwnerAuthentication)."
        case .enrolmentChanged:
            return
                "The fingerprints on this device changed since fingerprint login was enabled, so it was turned off for your safety."
        case .keyInvalidated:
            return
                "The fingerprint key was invalidated by a change of enrolled fingers, so fingerprint login was turned off."
        case .deviceRevoked: return "This device is no longer registered with the server (it was revoked)."
        case .unavailable(let why): return "Fingerprint login is unavailable: \(why)"
        case .server(let why): return "The server refused the fingerprint login: \(why)"
        }
    }

    /// Problems after which the binding must be made again (re-register, revoke the old one).
    var endsBinding: Bool {
        switch self {
        case .enrolmentChanged, .keyInvalidated, .deviceRevoked: return true
        default: return false
        }
    }
}

/// The login flow of the seed articles as a state machine over three facts: logged in before
/// (persisted), fingerprint login enabled (persisted), logged in this run (memory). The shell
/// performs each action and feeds back what happened; the machine never loops on a prompt: one
/// fingerprint prompt per launch, then the password.
public struct LoginFlow: Sendable {
    public enum Event: Equatable, Sendable {
        case launched
        case fingerprintLoggedIn
        case fingerprintFailed(FingerprintProblem)
        case passwordLoggedIn
        case passwordRefused(String)
        /// No password could be tried: none given, the server unreachable or limiting attempts.
        case passwordUnavailable(String)
        case enableAnswered(Bool)
        case deviceRegistered
        case registrationFailed(String)
    }

    public enum Action: Equatable, Sendable {
        case promptFingerprint
        /// Ask for the password; `note` says why (a failed fingerprint, a wrong password).
        case askPassword(note: String?)
        case offerFingerprint(note: String?)
        /// Create a new enclave key and register it; `replacingOldBinding`: revoke the previous one.
        case registerDevice(replacingOldBinding: Bool)
        case loggedIn(method: String, note: String?)
        case giveUp(String)
    }

    public static let passwordTries = 3

    public private(set) var facts: LoginFacts
    public private(set) var loggedInThisRun = false
    private var fingerprintTried = false
    private var passwordFailures = 0
    private var bindingEnded = false

    public init(facts: LoginFacts) { self.facts = facts }

    public mutating func handle(_ event: Event) -> Action {
        switch event {
        case .launched:
            if facts.loggedInBefore && facts.fingerprintEnabled && !fingerprintTried {
                fingerprintTried = true
                return .promptFingerprint
            }
            return .askPassword(note: nil)

        case .fingerprintLoggedIn:
            loggedInThisRun = true
            return .loggedIn(method: "fingerprint", note: nil)

        case .fingerprintFailed(let problem):
            if problem.endsBinding {
                facts.fingerprintEnabled = false
                bindingEnded = true
            }
            return .askPassword(note: problem.explanation + " Sign in with your password.")

        case .passwordLoggedIn:
            loggedInThisRun = true
            facts.loggedInBefore = true
            if facts.fingerprintEnabled { return .loggedIn(method: "password", note: nil) }
            if bindingEnded {
                return .offerFingerprint(note: "Fingerprint login can be enabled again for the fingers enrolled now.")
            }
            if !facts.declinedFingerprint { return .offerFingerprint(note: nil) }
            return .loggedIn(method: "password", note: nil)

        case .passwordRefused(let why):
            passwordFailures += 1
            if passwordFailures >= Self.passwordTries {
                return .giveUp("\(why) Too many wrong passwords; try again later.")
            }
            return .askPassword(note: why)

        case .passwordUnavailable(let why):
            return .giveUp(why)

        case .enableAnswered(let yes):
            if yes { return .registerDevice(replacingOldBinding: bindingEnded) }
            facts.declinedFingerprint = true
            return .loggedIn(
                method: "password",
                note: "Fingerprint login stays off (enable it with `touchlogin enable`)."
            )

        case .deviceRegistered:
            facts.fingerprintEnabled = true
            facts.declinedFingerprint = false
            bindingEnded = false
            return .loggedIn(
                method: "password",
                note: "Fingerprint login is enabled: next time, just touch the sensor."
            )

        case .registrationFailed(let why):
            return .loggedIn(method: "password", note: "Fingerprint login could not be enabled: \(why)")
        }
    }
}
