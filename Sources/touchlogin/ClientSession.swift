import Foundation
import LocalAuthentication
import TouchLoginAPI
import TouchLoginClient

#if canImport(Glibc)
import Glibc
#endif

/// The shell around `LoginFlow`: performs each action (terminal, enclave, server) and feeds the
/// outcome back; saves the persisted facts after every step.
struct ClientSession {
    let api: LoginAPIClient
    let authenticator: EnclaveAuthenticator
    let file: ClientStateFile
    let deviceName: String
    let host: String
    var username: String?
    var state: ClientState

    init(options: ClientOptions, deviceName: String) throws {
        let url = try options.serverURL
        api = LoginAPIClient(baseURL: url)
        authenticator = EnclaveAuthenticator(origin: try options.origin)
        file = options.stateFile
        self.deviceName = deviceName.isEmpty ? "this device" : deviceName
        host = url.host ?? "the server"
        do { state = try file.load() } catch { throw ClientError(.stateFile, "\(error)") }
        username = options.username ?? state.facts.username
    }

    // MARK: The login flow

    mutating func runLoginFlow(enableAnswer: Bool?) async -> Bool {
        var flow = LoginFlow(facts: state.facts)
        var action = flow.handle(.launched)
        while true {
            let event: LoginFlow.Event
            switch action {
            case .promptFingerprint:
                event = await fingerprintLogin()
            case .askPassword(let note):
                if let note { say(note) }
                event = await passwordLogin()
            case .offerFingerprint(let note):
                if let note { say(note) }
                let answer =
                    enableAnswer
                    ?? Terminal.confirm(
                        "Enable fingerprint login for \(username ?? "this account") on this device? [y/N] "
                    )
                event = .enableAnswered(answer)
            case .registerDevice:
                // The binding this replaces, if any, is revoked once the new one is bound, whether
                // or not the flow knew it had ended (a state file may outlive that knowledge).
                event = await registerDevice()
            case .loggedIn(let method, let note):
                if let note { say(note) }
                state.facts = flow.facts
                save()
                say("Logged in to \(host) as \(username ?? "?") with your \(method).")
                return true
            case .giveUp(let why):
                state.facts = flow.facts
                save()
                sayError(why)
                return false
            }
            action = flow.handle(event)
            state.facts = flow.facts
            save()
        }
    }

    private mutating func passwordLogin() async -> LoginFlow.Event {
        guard let name = username ?? Terminal.ask("Username: ") else {
            return .passwordUnavailable("No username given.")
        }
        username = name
        guard let password = Terminal.secret("Password for \(name): ") else {
            return .passwordUnavailable("No password given.")
        }
        do {
            let clientToken = state.clientTokens?[name.trimmingCharacters(in: .whitespaces).lowercased()]
            let session = try await api.passwordLogin(username: name, password: password, clientToken: clientToken)
            adopt(session)
            return .passwordLoggedIn
        } catch let e as APIError where e.code == APIError.Code.invalidCredentials.rawValue {
            return .passwordRefused(e.message)
        } catch {
            // Not a wrong password (server unreachable, rate limited…): asking again would not help.
            return .passwordUnavailable("\(error)")
        }
    }

    private mutating func fingerprintLogin() async -> LoginFlow.Event {
        guard var binding = state.binding else { return .fingerprintFailed(.keyInvalidated) }
        let context = LAContext()
        context.localizedFallbackTitle = "Use Password"
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else {
            if let e = error, e.code == LAError.Code.biometryNotEnrolled.rawValue {
                return .fingerprintFailed(.enrolmentChanged)
            }
            return .fingerprintFailed(
                error.flatMap { LAError($0) }.map { ClientError.fingerprintProblem(of: $0) }
                    ?? .unavailable("no biometry")
            )
        }
        if let enrolled = binding.domainState, context.domainState.biometry.stateHash != enrolled {
            return .fingerprintFailed(.enrolmentChanged)
        }
        do {
            let options = try await api.assertionOptions(username: username)
            try await context.evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics,
                localizedReason: "Log in to \(host) as \(username ?? "you")"
            )
            let (request, counter) = try authenticator.assert(
                options: options.publicKey,
                binding: binding,
                context: context
            )
            // The counter only moves forward, even if the server refuses this one.
            binding.signCount = counter
            state.binding = binding
            save()
            let session = try await api.passkeyLogin(request)
            adopt(session)
            for device in session.newDevices ?? [] {
                say(
                    "Note: a device was added to your account since this one last logged in: \"\(device.name)\", "
                        + "\(Self.date(device.createdAt)). If that was not you, change your password and remove it (touchlogin status shows the account's activity)."
                )
            }
            return .fingerprintLoggedIn
        } catch {
            return .fingerprintFailed(ClientError.fingerprintProblem(of: error))
        }
    }

    private mutating func registerDevice() async -> LoginFlow.Event {
        guard let token = state.session?.token else { return .registrationFailed("no session") }
        let context = LAContext()
        do {
            let api = self.api
            let deviceName = self.deviceName
            let options = try await withStepUp(token: token) {
                try await api.registrationOptions(token: token, deviceName: deviceName)
            }
            var aikCertificate: Data?
            do {
                aikCertificate = try await EnclaveAuthenticator.attestationKeyCertificate(
                    options: options.publicKey,
                    api: api,
                    token: token
                )
            } catch  where EnclaveAuthenticator.mayRegisterPacked(after: error, options: options.publicKey) {
                say("The TPM's attestation did not go through (\(error)); registering with laenclaved's own.")
            }
            say("Touch the sensor to enable fingerprint login.")
            try await context.evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics,
                localizedReason: "Enable fingerprint login to \(host)"
            )
            let registration = try authenticator.register(
                options: options.publicKey,
                deviceName: deviceName,
                context: context,
                attestationKeyCertificate: aikCertificate
            )
            _ = try await api.register(token: token, registration.request)
            // Kept first (a stop from here on loses nothing), then the binding it replaces goes,
            // whatever ended it: only now, so a refusal above (the TPM, the touch, the server's
            // rules) never costs it.
            let replaced = state.binding
            state.binding = registration.binding
            save()
            if let replaced, replaced.credentialID != registration.binding.credentialID {
                do {
                    try await api.revokeDevice(token: token, id: replaced.credentialID.base64URLEncodedString())
                } catch let error as APIError where error.code == APIError.Code.notFound.rawValue {
                    // Revoked already (from another device, or by the operator).
                } catch {
                    say(
                        "The key this device used before is still registered (\(error)); remove it with `touchlogin devices`."
                    )
                }
            }
            return .deviceRegistered
        } catch {
            let problem = ClientError.fingerprintProblem(of: error)
            return .registrationFailed(problem.explanation)
        }
    }

    /// Runs `change`; if the server wants the password typed again first (a session made by a
    /// fingerprint, or a password typed long ago), asks for it once, confirms it and runs `change` again.
    func withStepUp<T>(token: String, _ change: () async throws -> T) async throws -> T {
        do { return try await change() } catch let e as APIError where e.code == APIError.Code.stepUpRequired.rawValue {
            guard let password = Terminal.secret("Password for \(username ?? "this account") (to change its devices): ")
            else { throw e }
            try await api.confirmPassword(token: token, password: password)
            return try await change()
        }
    }

    private mutating func adopt(_ session: SessionResponse) {
        state.session = .init(token: session.token, expiresAt: session.expiresAt, method: session.method)
        state.facts.username = session.username
        username = session.username
        if let token = session.clientToken {
            state.clientTokens = (state.clientTokens ?? [:]).merging([session.username: token]) { $1 }
        }
        save()
    }

    // MARK: The other commands

    mutating func signup() async -> Bool {
        guard let name = username ?? Terminal.ask("Username: "),
            let password = Terminal.secret("New password for \(name): ")
        else {
            sayError("A username and a password are needed.")
            return false
        }
        do {
            let session = try await api.createAccount(username: name, password: password)
            state = ClientState()
            adopt(session)
            state.facts.loggedInBefore = true
            save()
            say(
                "Account \(session.username) created on \(host); you are logged in. Run `touchlogin` to log in again (and enable fingerprint login)."
            )
            return true
        } catch {
            sayError("\(error)")
            return false
        }
    }

    mutating func enable() async -> Bool {
        guard state.session != nil else {
            sayError("Log in first (touchlogin login).")
            return false
        }
        switch await registerDevice() {
        case .deviceRegistered:
            state.facts.fingerprintEnabled = true
            state.facts.declinedFingerprint = false
            save()
            say("Fingerprint login is enabled.")
            return true
        case .registrationFailed(let why):
            sayError("Fingerprint login could not be enabled: \(why)")
            return false
        default:
            return false
        }
    }

    mutating func disable() async -> Bool {
        if let binding = state.binding {
            guard let token = state.session?.token else {
                sayError("Log in first, so the server can revoke this device.")
                return false
            }
            let api = self.api
            do {
                try await withStepUp(token: token) {
                    try await api.revokeDevice(token: token, id: binding.credentialID.base64URLEncodedString())
                }
            } catch let e as APIError where e.code == APIError.Code.notFound.rawValue {
                // Revoked already.
            } catch {
                sayError("\(error)")
                return false
            }
        }
        state.binding = nil
        state.facts.fingerprintEnabled = false
        state.facts.declinedFingerprint = true
        save()
        say("Fingerprint login is off on this device; the server no longer accepts its key.")
        return true
    }

    func save() {
        do { try file.save(state) } catch { sayError("could not save \(file.path): \(error)") }
    }
}
