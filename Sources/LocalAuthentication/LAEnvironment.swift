import EnclaveClient
import EnclaveProtocol
import Foundation
import Synchronization

/// The authentication environment of the current user: which mechanisms exist and whether they
/// are usable, readable without prompting (e.g. to see a biometric lockout).
///
/// Our choice: observers are told of changes by polling the daemon once a second while at least
/// one observer is registered; observers are held weakly and called on a private queue.
public final class LAEnvironment: NSObject, Sendable {
    public typealias State = LAEnvironmentState
    public typealias Mechanism = LAEnvironmentMechanism
    public typealias Observer = LAEnvironmentObserver
    public typealias MechanismBiometry = LAEnvironmentMechanismBiometry
    public typealias MechanismUserPassword = LAEnvironmentMechanismUserPassword
    public typealias MechanismCompanion = LAEnvironmentMechanismCompanion

    /// The environment of the user running this process, on the daemon this process talks to
    /// (bound where it is first obtained, so observers keep polling the same daemon).
    public static var currentUser: LAEnvironment {
        let endpoint = EnclaveEndpoint.resolve()
        return instances.withLock {
            if let e = $0[endpoint.socketPath] { return e }
            let e = LAEnvironment(endpoint: endpoint)
            $0[endpoint.socketPath] = e
            return e
        }
    }

    private static let instances = Mutex<[String: LAEnvironment]>([:])

    /// Who observes, and the poll that runs while anyone does.
    private struct Observation {
        var observers: [WeakObserver] = []
        var timer: DispatchSourceTimer?
        var lastState: LAEnvironmentState?
    }

    private let endpoint: EnclaveEndpoint
    private let observation = Mutex(Observation())
    private let queue = DispatchQueue(label: "LocalAuthentication.LAEnvironment")

    init(endpoint: EnclaveEndpoint) { self.endpoint = endpoint }

    public var state: LAEnvironmentState {
        guard let connection = try? EnclaveConnections.shared(for: endpoint),
            case .status(let s)? = try? connection.request(.status)
        else { return LAEnvironmentState(status: nil) }
        return LAEnvironmentState(status: s)
    }

    public func addObserver(_ observer: any LAEnvironmentObserver) {
        let queue = self.queue
        observation.withLock {
            $0.observers.removeAll { $0.value == nil || $0.value === observer }
            $0.observers.append(WeakObserver(value: observer))
            if $0.timer == nil {
                $0.lastState = nil
                let t = DispatchSource.makeTimerSource(queue: queue)
                t.schedule(deadline: .now(), repeating: 1.0)
                t.setEventHandler { [weak self] in self?.poll() }
                $0.timer = t
                t.resume()
            }
        }
    }

    public func removeObserver(_ observer: any LAEnvironmentObserver) {
        observation.withLock {
            $0.observers.removeAll { $0.value == nil || $0.value === observer }
            if $0.observers.isEmpty {
                $0.timer?.cancel()
                $0.timer = nil
            }
        }
    }

    private func poll() {
        let new = state
        let (old, targets) = observation.withLock { o -> (LAEnvironmentState?, [WeakObserver]) in
            defer { o.lastState = new }
            return (o.lastState, o.observers)
        }
        guard let old, old != new else { return }
        for target in targets { target.value?.environment(self, stateDidChangeFromOldState: old) }
    }

    /// Observers are held weakly, as Apple's are; they are called on the environment's queue.
    /// Unchecked: Apple's observer protocol is not `Sendable` (an app's view controller is one); the
    /// reference is only read, inside `observation`'s lock or on the environment's queue.
    private struct WeakObserver: @unchecked Sendable { weak var value: (any LAEnvironmentObserver)? }
}

public protocol LAEnvironmentObserver: AnyObject {
    func environment(_ environment: LAEnvironment, stateDidChangeFromOldState oldState: LAEnvironmentState)
}

extension LAEnvironmentObserver {
    public func environment(_ environment: LAEnvironment, stateDidChangeFromOldState oldState: LAEnvironmentState) {}
}

public final class LAEnvironmentState: NSObject, NSCopying, Sendable {
    /// nil when there is no biometric sensor.
    public let biometry: LAEnvironmentMechanismBiometry?
    public let userPassword: LAEnvironmentMechanismUserPassword?
    /// Linux has no companion devices yet: always empty.
    public let companions: [LAEnvironmentMechanismCompanion] = []
    public var allMechanisms: [LAEnvironmentMechanism] { [biometry, userPassword].compactMap { $0 } }

    init(status: UserStatus?) {
        if let s = status, let sensor = s.sensor {
            let type = LABiometryType(rawValue: sensor.kind.rawValue) ?? .none
            biometry = LAEnvironmentMechanismBiometry(
                biometryType: type,
                isEnrolled: s.enrolledCount > 0,
                isLockedOut: s.biometryLockout != nil,
                stateHash: s.domainState ?? Data(),
                usable: s.passcodeSet && s.enrolledCount > 0 && s.biometryLockout == nil,
                name: sensor.kind.displayName
            )
        } else {
            biometry = nil
        }
        userPassword = status.map { LAEnvironmentMechanismUserPassword(isSet: $0.passcodeSet) }
    }

    public func copy(with zone: NSZone? = nil) -> Any { self }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let o = object as? LAEnvironmentState else { return false }
        return biometry == o.biometry && userPassword == o.userPassword
    }
}

/// Unchecked here and in the three subclasses: Apple's shape is a class with subclasses (a
/// non-final class cannot be checked); every stored property is a `let`.
public class LAEnvironmentMechanism: NSObject, @unchecked Sendable {
    /// Whether `canEvaluatePolicy` would succeed for this mechanism now.
    public let isUsable: Bool
    public let localizedName: String
    public let iconSystemName: String
    init(isUsable: Bool, localizedName: String, iconSystemName: String) {
        self.isUsable = isUsable
        self.localizedName = localizedName
        self.iconSystemName = iconSystemName
    }
    public override func isEqual(_ object: Any?) -> Bool {
        guard let o = object as? LAEnvironmentMechanism else { return false }
        return isUsable == o.isUsable && localizedName == o.localizedName
    }
}

public final class LAEnvironmentMechanismBiometry: LAEnvironmentMechanism, @unchecked Sendable {
    public let biometryType: LABiometryType
    public let isEnrolled: Bool
    /// True after five failed matches (or another reason biometrics need the passcode first).
    public let isLockedOut: Bool
    /// Same value as `LAContext().domainState.biometry.stateHash` (empty when nothing is enrolled).
    public let stateHash: Data
    public let builtInSensorInaccessible = false
    init(biometryType: LABiometryType, isEnrolled: Bool, isLockedOut: Bool, stateHash: Data, usable: Bool, name: String)
    {
        self.biometryType = biometryType
        self.isEnrolled = isEnrolled
        self.isLockedOut = isLockedOut
        self.stateHash = stateHash
        super.init(
            isUsable: usable,
            localizedName: name,
            iconSystemName: biometryType == .faceID ? "faceid" : "touchid"
        )
    }
    public override func isEqual(_ object: Any?) -> Bool {
        guard let o = object as? LAEnvironmentMechanismBiometry else { return false }
        return super.isEqual(o) && isEnrolled == o.isEnrolled && isLockedOut == o.isLockedOut
            && stateHash == o.stateHash
    }
}

public final class LAEnvironmentMechanismUserPassword: LAEnvironmentMechanism, @unchecked Sendable {
    public let isSet: Bool
    init(isSet: Bool) {
        self.isSet = isSet
        super.init(isUsable: isSet, localizedName: "Passcode", iconSystemName: "lock")
    }
}

public final class LAEnvironmentMechanismCompanion: LAEnvironmentMechanism, @unchecked Sendable {
    public let type: LACompanionType
    public let stateHash: Data?
    init(type: LACompanionType, stateHash: Data?) {
        self.type = type
        self.stateHash = stateHash
        super.init(isUsable: false, localizedName: "Companion", iconSystemName: "applewatch")
    }
}
