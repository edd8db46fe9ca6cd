import ArgumentParser
import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthentication

extension LAPolicy: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument {
        case "deviceOwnerAuthenticationWithBiometrics", "biometrics": self = .deviceOwnerAuthenticationWithBiometrics
        case "deviceOwnerAuthentication", "owner": self = .deviceOwnerAuthentication
        case "deviceOwnerAuthenticationWithCompanion", "companion": self = .deviceOwnerAuthenticationWithCompanion
        case "deviceOwnerAuthenticationWithBiometricsOrCompanion":
            self = .deviceOwnerAuthenticationWithBiometricsOrCompanion
        default:
            guard let raw = Int(argument), let p = LAPolicy(rawValue: raw) else { return nil }
            self = p
        }
    }
}

struct AuthenticationOutcome: Encodable {
    var success: Bool
    var code: Int?
    var name: String?
    var message: String?
    var biometryType: Int
}

extension LAError.Code {
    var name: String {
        switch self {
        case .authenticationFailed: return "authenticationFailed"
        case .userCancel: return "userCancel"
        case .userFallback: return "userFallback"
        case .systemCancel: return "systemCancel"
        case .passcodeNotSet: return "passcodeNotSet"
        case .touchIDNotAvailable: return "biometryNotAvailable"
        case .touchIDNotEnrolled: return "biometryNotEnrolled"
        case .touchIDLockout: return "biometryLockout"
        case .appCancel: return "appCancel"
        case .invalidContext: return "invalidContext"
        case .watchNotAvailable: return "companionNotAvailable"
        case .biometryNotPaired: return "biometryNotPaired"
        case .biometryDisconnected: return "biometryDisconnected"
        case .invalidDimensions: return "invalidDimensions"
        case .notInteractive: return "notInteractive"
        }
    }
}

/// Runs one evaluation on a fresh context and waits for it (lactl is synchronous).
func evaluateSynchronously(_ context: LAContext, _ policy: LAPolicy, reason: String) -> (Bool, LAError?) {
    let done = DispatchSemaphore(value: 0)
    let box = HandedResult<(Bool, LAError?)>()
    context.evaluatePolicy(policy, localizedReason: reason) { success, error in
        box.set(
            (
                success,
                error.map { ($0 as? LAError) ?? LAError(.systemCancel, userInfo: [NSLocalizedDescriptionKey: "\($0)"]) }
            )
        )
        done.signal()
    }
    done.wait()
    return box.current!
}

struct Authenticate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask for the device owner, as an app would: exit 0 when authenticated.",
        discussion: """
            Guard a command with the owner's presence: lactl authenticate --reason "Deploy to production" && ./deploy. \
            Exit status: 0 authenticated; 10 + |LAError code| otherwise (11 authenticationFailed, 12 userCancel, \
            13 userFallback, 14 systemCancel, 15 passcodeNotSet, 16 biometryNotAvailable, 17 biometryNotEnrolled, \
            18 biometryLockout, 21 companionNotAvailable), 30 notInteractive; 69 when the daemon cannot be reached.
            """
    )

    @OptionGroup var client: ClientOptions
    @Option(
        help: "deviceOwnerAuthentication (owner), deviceOwnerAuthenticationWithBiometrics (biometrics), or a raw value."
    )
    var policy: LAPolicy = .deviceOwnerAuthentication
    @Option(help: "Why the app asks; shown on the prompt.") var reason: String
    @Option(name: .customLong("cancel-title")) var cancelTitle: String?
    @Option(name: .customLong("fallback-title"), help: "Title of the fallback button; \"\" hides it.")
    var fallbackTitle: String?
    @Option(name: .customLong("reuse-duration"), help: "Seconds a recent biometric match counts (0…300).")
    var reuseDuration: Double = 0
    @Flag(name: .customLong("no-interaction"), help: "Fail with notInteractive instead of prompting.")
    var noInteraction = false
    @Flag(help: "Print the outcome as JSON.") var json = false

    func run() throws {
        _ = try client.connection()  // exits 69 when no daemon can be reached or started
        let context = EnclaveEndpoint.$override.withValue(client.endpoint()) { LAContext() }
        context.localizedCancelTitle = cancelTitle
        context.localizedFallbackTitle = fallbackTitle
        context.touchIDAuthenticationAllowableReuseDuration = reuseDuration
        context.interactionNotAllowed = noInteraction
        var preflight: NSError?
        _ = context.canEvaluatePolicy(policy, error: &preflight)
        let (success, error) = evaluateSynchronously(context, policy, reason: reason)
        let outcome = AuthenticationOutcome(
            success: success,
            code: error?.code.rawValue,
            name: error?.code.name,
            message: error?.localizedDescription,
            biometryType: context.biometryType.rawValue
        )
        if json {
            printJSON(outcome)
        } else if success {
            print("authenticated")
        } else if let error {
            printError("not authenticated: \(error.code.name) (\(error.code.rawValue)): \(error.localizedDescription)")
        }
        if !success {
            let code = error?.code.rawValue ?? -1
            throw ExitCode(ExitStatus.forLAError(code))
        }
    }
}
