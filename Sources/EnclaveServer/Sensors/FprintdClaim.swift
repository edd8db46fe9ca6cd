import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A held claim on the reader: its connection, device and user.
final class FprintdClaim {
    let bus: SdBusConnection
    let device: String
    let user: String
    init(bus: SdBusConnection, device: String, user: String) {
        self.bus = bus
        self.device = device
        self.user = user
    }
}

/// The worker thread's view of the claim, handed to each job.
final class ClaimHolder: ThreadState {
    private let busAddress: String?
    private(set) var current: FprintdClaim?
    var idleDeadline: Date?
    /// Between two captures of one evaluation the daemon only records the attempt: a claim idle this
    /// long belongs to an evaluation that ended without disarming, and goes.
    static let idleRelease: TimeInterval = 30

    init(busAddress: String?) { self.busAddress = busAddress }

    /// The held claim if it is for `user` and its fprintd is still the same; else a new one.
    /// `presentUID`: the reader is to be armed for this uid, who must be the user at the machine
    /// (checked before fprintd is asked for a claim, so nobody else's use is disturbed).
    func claim(for user: String, presentUID: UInt32? = nil, cancelled: () -> Bool) throws -> FprintdClaim {
        idleDeadline = nil
        if let c = current, c.user == user {
            c.bus.drain()
            var fprintdLeft = false
            while let change = c.bus.take("NameOwnerChanged") {
                if change.strings.first == FprintdSensor.service { fprintdLeft = true }
            }
            if !fprintdLeft {
                if let uid = presentUID { try FprintdSensor.requirePresence(c.bus, uid: uid) }
                return c
            }
            current = nil  // fprintd restarted: that claim died with it
        }
        release()
        let (bus, device) = try FprintdSensor.connect(busAddress)
        if let uid = presentUID { try FprintdSensor.requirePresence(bus, uid: uid) }
        try FprintdSensor.claim(bus, device: device, user: user, cancelled: cancelled)
        let c = FprintdClaim(bus: bus, device: device, user: user)
        current = c
        return c
    }

    func keepIdle() { idleDeadline = Date().addingTimeInterval(Self.idleRelease) }

    func idle() { release() }

    func release() {
        idleDeadline = nil
        guard let c = current else { return }
        current = nil
        _ = try? c.bus.call(FprintdSensor.service, c.device, FprintdSensor.deviceInterface, "Release")
    }
}

/// The query thread's connection to fprintd, kept open between reads and made again after a failure.
final class FprintdQueryConnection: ThreadState {
    private let busAddress: String?
    private var bus: SdBusConnection?
    private var device: String?

    init(busAddress: String?) { self.busAddress = busAddress }

    var idleDeadline: Date? { nil }
    func idle() {}

    /// Runs `body` on the open connection and fprintd's reader; also says whether fprintd restarted
    /// or finished an enrolment since the last read (what was read before may be stale).
    func read<T>(_ body: (SdBusConnection, String) throws -> T) throws -> (T, changed: Bool) {
        do {
            let (bus, device, changed) = try open()
            return (try body(bus, device), changed)
        } catch {
            bus = nil
            device = nil
            throw error
        }
    }

    private func open() throws -> (SdBusConnection, String, changed: Bool) {
        if let bus, let device {
            bus.drain()
            var changed = false
            while let change = bus.take("NameOwnerChanged") {
                if change.strings.first == FprintdSensor.service { changed = true }
            }
            while let status = bus.take("EnrollStatus") {
                if status.strings.first == "enroll-completed" { changed = true }
            }
            bus.discardSignals()
            if !changed { return (bus, device, false) }
            // fprintd restarted: its reader's object path may be another.
            self.device = try FprintdSensor.defaultDevice(bus)
            return (bus, self.device!, true)
        }
        let (bus, device) = try FprintdSensor.connect(busAddress)
        self.bus = bus
        self.device = device
        // A new connection: what was read on the one before may be stale.
        return (bus, device, true)
    }
}
