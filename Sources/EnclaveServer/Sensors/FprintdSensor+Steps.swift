import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension FprintdSensor {
    // MARK: fprintd steps

    /// Refuses to arm the reader for `uid` unless it is the user at the machine (`SessionPresence`).
    static func requirePresence(_ bus: SdBusConnection, uid: UInt32) throws {
        let state = loginState(bus, uid: uid)
        guard SessionPresence.mayArmReader(userState: state) else {
            throw DaemonError(.sensorFailed, SessionPresence.refusal(uid: uid, userState: state))
        }
    }

    /// logind's `User.State` for `uid` ("active", "online", "lingering"…), nil when logind knows no
    /// such user or cannot be asked.
    static func loginState(_ bus: SdBusConnection, uid: UInt32) -> String? {
        let login = "org.freedesktop.login1"
        guard
            let path = try? bus.call(
                login,
                "/org/freedesktop/login1",
                "org.freedesktop.login1.Manager",
                "GetUser",
                uint32: uid,
                read: SdBusConnection.readObjectPath
            )
        else { return nil }
        return try? bus.call(
            login,
            path,
            "org.freedesktop.DBus.Properties",
            "Get",
            ["org.freedesktop.login1.User", "State"],
            read: SdBusConnection.readVariantString
        )
    }

    static let retryMessages = [
        "enroll-retry-scan": "scan again",
        "enroll-swipe-too-short": "swipe too short, try again",
        "enroll-finger-not-centered": "finger not centred, try again",
        "enroll-remove-and-retry": "remove the finger and try again",
    ]

    static func defaultDevice(_ bus: SdBusConnection) throws -> String {
        do {
            return try bus.call(
                service,
                "/net/reactivated/Fprint/Manager",
                "net.reactivated.Fprint.Manager",
                "GetDefaultDevice",
                read: SdBusConnection.readObjectPath
            )
        } catch let e as DaemonError where e.isDBusError("NoSuchDevice") {
            throw DaemonError(.sensorFailed, "fprintd sees no fingerprint reader")
        } catch let e as DaemonError where e.code == .dbusCallFailed {
            throw DaemonError(.sensorFailed, "fprintd does not answer (\(e))")
        }
    }

    /// A new connection to fprintd that hears its device's signals and its coming and going, and
    /// the object path of its reader.
    static func connect(_ address: String?) throws -> (SdBusConnection, device: String) {
        let bus: SdBusConnection
        do { bus = try SdBusConnection(address: address) } catch {
            throw DaemonError(.sensorFailed, "cannot reach fprintd on the D-Bus system bus (\(error))")
        }
        try bus.subscribe(sender: service, interface: deviceInterface)
        try bus.subscribe(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus")
        return (bus, try defaultDevice(bus))
    }

    static func enrolledFingers(_ bus: SdBusConnection, device: String, user: String) throws -> [String] {
        do {
            return try bus.call(
                service,
                device,
                deviceInterface,
                "ListEnrolledFingers",
                [user],
                read: SdBusConnection.readStrings
            )
        } catch let e as DaemonError where e.isDBusError("NoEnrolledPrints") {
            return []
        } catch let e as DaemonError where e.code == .dbusCallFailed {
            throw DaemonError(.sensorFailed, "fprintd could not list the enrolled fingers: \(e)")
        }
    }

    /// Claims the reader for `user`, retrying a while when another client holds it (a stale claim
    /// after suspend clears when its connection dies).
    static func claim(_ bus: SdBusConnection, device: String, user: String, cancelled: () -> Bool) throws {
        for attempt in 0...claimRetries {
            do {
                try bus.call(service, device, deviceInterface, "Claim", [user])
                bus.discardSignals()
                return
            } catch let e as DaemonError where e.isDBusError("AlreadyInUse") {
                if attempt == claimRetries || cancelled() {
                    throw DaemonError(
                        .sensorFailed,
                        "the fingerprint reader is in use by another program (\(e.message))"
                    )
                }
                usleep(100_000)
            } catch let e as DaemonError where e.isDBusError("PermissionDenied") {
                throw DaemonError(
                    .sensorFailed,
                    "fprintd refused to let laenclaved use the reader (polkit: \(e.message))"
                )
            } catch let e as DaemonError where e.code == .dbusCallFailed {
                throw DaemonError(.sensorFailed, "fprintd could not claim the reader: \(e)")
            }
        }
    }

    /// fprintd gone (crashed, restarted) ends the operation: its claim and verify died with it.
    static func checkStillRunning(_ bus: SdBusConnection) throws {
        if let change = bus.take("NameOwnerChanged"), change.strings.first == service, change.strings.count == 3,
            change.strings[2].isEmpty
        {
            throw DaemonError(.sensorFailed, "fprintd stopped during the operation")
        }
    }

    static func fprintd(_ body: () throws -> Void) throws {
        do { try body() } catch let e as DaemonError where e.code == .dbusCallFailed {
            if e.isDBusError("InvalidFingername") {
                throw DaemonError(.invalidParameter, "fprintd does not know that finger name")
            }
            if e.isDBusError("AlreadyInUse") { throw DaemonError(.busy, "the fingerprint reader is busy") }
            throw DaemonError(.sensorFailed, "fprintd: \(e)")
        }
    }
}
