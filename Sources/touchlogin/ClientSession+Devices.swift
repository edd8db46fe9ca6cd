import Foundation
import LocalAuthentication
import TouchLoginAPI
import TouchLoginClient

#if canImport(Glibc)
import Glibc
#endif

extension ClientSession {
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
    func changeDevice(
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
}
