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
        do { state = try file.load() } catch { throw ClientError("\(error)") }
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
            case .registerDevice(let replacing):
                event = await registerDevice(revokingOld: replacing)
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
                error.flatMap { LAError($0) }.map { FingerprintFailure.from($0) } ?? .unavailable("no biometry")
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
            return .fingerprintFailed(FingerprintFailure.from(error))
        }
    }

    private mutating func registerDevice(revokingOld: Bool) async -> LoginFlow.Event {
        guard let token = state.session?.token else { return .registrationFailed("no session") }
        let context = LAContext()
        do {
            let api = self.api
            let deviceName = self.deviceName
            let options = try await withStepUp(token: token) {
                try await api.registrationOptions(token: token, deviceName: deviceName)
            }
            if revokingOld, let old = state.binding {
                try? await api.revokeDevice(token: token, id: old.credentialID.base64URLEncodedString())
                state.binding = nil
                save()
            }
            say("Touch the sensor to enable fingerprint login.")
            try await context.evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics,
                localizedReason: "Enable fingerprint login to \(host)"
            )
            let registration = try authenticator.register(
                options: options.publicKey,
                deviceName: deviceName,
                context: context
            )
            _ = try await api.register(token: token, registration.request)
            state.binding = registration.binding
            save()
            return .deviceRegistered
        } catch {
            let problem = FingerprintFailure.from(error)
            return .registrationFailed(problem.explanation)
        }
    }

    /// Runs `change`; if the server wants the password typed again first (a session made by a
    /// fingerprint, or a password typed long ago), asks for it once, confirms it and runs `change` again.
    private func withStepUp<T>(token: String, _ change: () async throws -> T) async throws -> T {
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
        switch await registerDevice(revokingOld: true) {
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

    // MARK: Devices

    func listDevices() async -> Bool {
        guard let token = state.session?.token else {
            sayError("Log in first (touchlogin login).")
            return false
        }
        do {
            let devices = try await api.account(token: token).devices
            let mine = state.binding?.credentialID.base64URLEncodedString()
            if devices.isEmpty { say("No device can sign in to this account with a passkey.") }
            for d in devices {
                let kind = d.backupEligible == true ? (d.backedUp == true ? "synced" : "may sync") : "this device only"
                let verification = d.userVerified.map { $0 ? ", verifies the user" : ", presence only" } ?? ""
                let model =
                    d.aaguid.flatMap { $0 == "00000000-0000-0000-0000-000000000000" ? nil : ", model \($0)" } ?? ""
                let transports = d.transports.flatMap { $0.isEmpty ? nil : ", " + $0.joined(separator: "/") } ?? ""
                say(
                    "\(d.id == mine ? "*" : "-") \(d.name)  [\(d.id.prefix(12))…]  added \(Self.date(d.createdAt)), "
                        + "last used \(d.lastUsedAt.map(Self.date) ?? "never"), \(kind)\(verification)\(transports)\(model)"
                )
            }
            return true
        } catch {
            sayError("\(error)")
            return false
        }
    }

    mutating func renameDevice(_ which: String, to name: String) async -> Bool {
        await changeDevice(which) { api, token, device in
            _ = try await api.renameDevice(token: token, id: device.id, name: name)
            say("Renamed \"\(device.name)\" to \"\(name)\".")
        } != nil
    }

    mutating func removeDevice(_ which: String) async -> Bool {
        let removed = await changeDevice(which) { api, token, device in
            try await api.revokeDevice(token: token, id: device.id)
            say("Removed \"\(device.name)\": it can no longer sign in.")
        }
        if let removed, removed.id == state.binding?.credentialID.base64URLEncodedString() {
            state.binding = nil
            state.facts.fingerprintEnabled = false
            save()
        }
        return removed != nil
    }

    /// The device named `which` (its name, or the start of its ID), changed by `change`, with the
    /// password asked for if the server wants a step-up; the device, or nil if nothing changed.
    private func changeDevice(
        _ which: String,
        _ change: @escaping (LoginAPIClient, String, DeviceResponse) async throws -> Void
    ) async -> DeviceResponse? {
        guard let token = state.session?.token else {
            sayError("Log in first (touchlogin login).")
            return nil
        }
        do {
            let devices = try await api.account(token: token).devices
            let matches = devices.filter { $0.name == which || $0.id.hasPrefix(which) }
            guard matches.count == 1, let device = matches.first else {
                sayError(
                    matches.isEmpty
                        ? "No device is named \"\(which)\"."
                        : "\"\(which)\" names several devices; give the start of its ID."
                )
                return nil
            }
            let api = self.api
            try await withStepUp(token: token) { try await change(api, token, device) }
            return device
        } catch {
            sayError("\(error)")
            return nil
        }
    }

    func changePassword() async -> Bool {
        guard let token = state.session?.token else {
            sayError("Log in first (touchlogin login).")
            return false
        }
        guard let current = Terminal.secret("Current password: "),
            let new = Terminal.secret("New password (8+ characters): ")
        else {
            sayError("Both passwords are needed.")
            return false
        }
        do {
            try await api.changePassword(token: token, current: current, new: new)
            say("Password changed; every other session of the account has ended.")
            return true
        } catch {
            sayError("\(error)")
            return false
        }
    }

    mutating func logout() async -> Bool {
        guard let token = state.session?.token else {
            say("Not logged in.")
            return true
        }
        do { try await api.logout(token: token) } catch let e as APIError
            where e.code == APIError.Code.unauthorized.rawValue
        {
            // The session had ended already.
        } catch {
            sayError("\(error)")
            return false
        }
        state.session = nil
        save()
        say("Logged out.")
        return true
    }

    func printStatus(json: Bool) async {
        var sessionAlive = false
        var devices: [DeviceResponse] = []
        var activity: [ActivityResponse] = []
        if let token = state.session?.token, let account = try? await api.account(token: token) {
            sessionAlive = true
            devices = account.devices
            activity = account.activity ?? []
        }
        let thisDevice = state.binding?.credentialID.base64URLEncodedString()
        if json {
            let object: [String: Any] = [
                "server": api.baseURL.absoluteString, "username": username ?? NSNull(),
                "loggedInBefore": state.facts.loggedInBefore, "fingerprintEnabled": state.facts.fingerprintEnabled,
                "sessionAlive": sessionAlive, "credentialID": thisDevice ?? NSNull(),
                "devices": devices.map {
                    [
                        "id": $0.id, "name": $0.name, "signCount": $0.signCount,
                        "attestedKey": $0.attestedKey ?? NSNull(),
                    ] as [String: Any]
                },
                "activity": activity.map {
                    ["at": $0.at, "kind": $0.kind, "device": $0.deviceName ?? NSNull(), "address": $0.address]
                        as [String: Any]
                },
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]) {
                print(String(decoding: data, as: UTF8.self))
            }
            return
        }
        print("server:              \(api.baseURL.absoluteString)")
        print("username:            \(username ?? "(none yet)")")
        print("logged in before:    \(state.facts.loggedInBefore ? "yes" : "no")")
        print("fingerprint login:   \(state.facts.fingerprintEnabled ? "enabled" : "off")")
        print("session:             \(sessionAlive ? "alive" : "none")")
        if sessionAlive {
            print("devices on server:   \(devices.isEmpty ? "none" : "")")
            for d in devices {
                let attested = d.attestedKey.map { "; attested: \($0)" } ?? ""
                print("  \(d.id == thisDevice ? "*" : "-") \(d.name) (signed \(d.signCount)×\(attested))")
            }
            print("recent activity:     \(activity.isEmpty ? "none" : "")")
            for a in activity.prefix(10) {
                let device = a.deviceName.map { " \"\($0)\"" } ?? ""
                print("  \(Self.date(a.at))  \(a.kind)\(device) from \(a.address)")
            }
        }
    }

    static func date(_ seconds: Double) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }

    private func save() {
        do { try file.save(state) } catch { sayError("could not save \(file.path): \(error)") }
    }
}

func say(_ text: String) {
    print(text)
    fflush(nil)
}
func sayError(_ text: String) { FileHandle.standardError.write(Data(("touchlogin: " + text + "\n").utf8)) }

/// Questions on the terminal (echo off for secrets), or lines from standard input when piped.
enum Terminal {
    static func ask(_ question: String) -> String? {
        print(question, terminator: "")
        fflush(nil)
        guard let line = readLine(strippingNewline: true) else { return nil }
        let answer = line.trimmingCharacters(in: .whitespaces)
        return answer.isEmpty ? nil : answer
    }

    static func confirm(_ question: String) -> Bool {
        guard let answer = ask(question)?.lowercased() else { return false }
        return answer == "y" || answer == "yes"
    }

    static func secret(_ question: String) -> String? {
        guard isatty(STDIN_FILENO) == 1 else {
            print(question, terminator: "")
            fflush(nil)
            let line = readLine(strippingNewline: true)
            print("")
            return (line?.isEmpty ?? true) ? nil : line
        }
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            print("")
        }
        print(question, terminator: "")
        fflush(nil)
        let line = readLine(strippingNewline: true)
        return (line?.isEmpty ?? true) ? nil : line
    }
}
