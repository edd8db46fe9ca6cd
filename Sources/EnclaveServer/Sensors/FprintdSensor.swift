import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A real fingerprint reader through fprintd (the freedesktop fingerprint daemon, D-Bus, libfprint's
/// drivers). A claim belongs to its D-Bus connection and sd-bus to its thread, so everything that
/// claims the reader runs on one worker thread that holds at most one claim: an evaluation's
/// captures share it (claimed at the first, released on a match, a cancellation, an error or when
/// the evaluation disarms the sensor), so a finger placed between two attempts waits in the reader
/// instead of being dropped by a close; an enrolment claims and releases. Listing the enrolled
/// fingers needs no claim and runs on a thread of its own. A claim whose fprintd went away is dropped and made again, so a restart of fprintd heals.
///
/// Results: `verify-match` / `verify-no-match` are readings; the retry results ("finger not
/// centred"…) go to the prompt and the verify goes on: never failed attempts; disconnection and unknown errors fail the
/// capture with a clear message. fprintd emits a final `verify-no-match` when a verify is stopped
/// while it waits: that one is never read (the capture is over by then).
public final class FprintdSensor: BiometricSensor, Sendable {
    public let info: SensorInfo
    /// nil: the system bus.
    let busAddress: String?
    /// Claims, verifies and enrolments: one thread, one claim at a time.
    private let worker: DedicatedThread<ClaimHolder>
    /// Enrolled-list reads: a thread of their own (a verify may hold the worker for minutes) with
    /// one connection kept open.
    private let queries: DedicatedThread<FprintdQueryConnection>
    private let cache = Mutex(EnrolledListCache())
    /// Monotonic seconds, for the cache.
    private let now: @Sendable () -> Double

    static let service = "net.reactivated.Fprint"
    static let deviceInterface = "net.reactivated.Fprint.Device"
    static let fingerNames = [
        "left-thumb", "left-index-finger", "left-middle-finger", "left-ring-finger", "left-little-finger",
        "right-thumb", "right-index-finger", "right-middle-finger", "right-ring-finger", "right-little-finger",
    ]
    /// How long a claim held by someone else (another program, a stale claim after suspend) is retried.
    static let claimRetries = 10

    /// Connects once to check that fprintd answers and has a reader; throws a clear error if not.
    public init(
        busAddress: String? = nil,
        now: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
    ) throws {
        self.busAddress = busAddress
        let name = try Self.onThisThread(busAddress) { bus in
            let device = try Self.defaultDevice(bus)
            return try bus.call(
                Self.service,
                device,
                "org.freedesktop.DBus.Properties",
                "Get",
                [Self.deviceInterface, "name"],
                read: SdBusConnection.readVariantString
            )
        }
        info = SensorInfo(kind: .touchID, name: "fprintd: \(name)", simulated: false)
        worker = DedicatedThread(ClaimHolder(busAddress: busAddress), name: "la-fprintd")
        queries = DedicatedThread(FprintdQueryConnection(busAddress: busAddress), name: "la-fprintd-ask")
        self.now = now
    }

    // MARK: BiometricSensor

    /// fprintd's list; while fprintd cannot be asked (restarting, no reader), the list the daemon
    /// saved last, so status and domain state stay steady and a capture reports the real problem.
    public func enrolledIdentities(uid: UInt32, stored: [String]) async throws -> [String] {
        let user = accountName(uid: uid)
        let started = now()
        let (cached, generation) = cache.withLock { ($0.fingers(of: user, now: started), $0.generation) }
        if let cached { return cached }
        do {
            let (fingers, fprintdChanged) = try await queries.perform { connection, _ in
                try connection.read { bus, device in try Self.enrolledFingers(bus, device: device, user: user) }
            }
            cache.withLock { cache in
                if fprintdChanged {
                    cache.forgetAll()
                } else {
                    cache.store(fingers, of: user, at: started, generation: generation)
                }
            }
            return fingers
        } catch let error as DaemonError where error.code == .sensorFailed {
            return stored
        }
    }

    /// Our own change of `uid`'s prints: the next read asks fprintd.
    private func forgetEnrolled(_ uid: UInt32) {
        let user = accountName(uid: uid)
        cache.withLock { $0.forget(user) }
    }

    public func enroll(
        uid: UInt32,
        name: String,
        stored: [String],
        progress: @escaping @Sendable (EnrolmentProgress) -> Void
    ) async throws -> [String] {
        guard Self.fingerNames.contains(name) else {
            throw DaemonError(
                .invalidParameter,
                "fprintd enrols fingers by name: \(Self.fingerNames.joined(separator: ", "))"
            )
        }
        guard !stored.contains(name) else { throw DaemonError(.alreadyExists, "\"\(name)\" is already enrolled") }
        let user = accountName(uid: uid)
        defer { forgetEnrolled(uid) }
        return try await worker.perform { holder, cancelled in
            let claim = try holder.claim(for: user, presentUID: uid, cancelled: cancelled)
            defer { holder.release() }
            let bus = claim.bus
            let device = claim.device
            let stages =
                (try? bus.call(
                    Self.service,
                    device,
                    "org.freedesktop.DBus.Properties",
                    "Get",
                    [Self.deviceInterface, "num-enroll-stages"],
                    read: SdBusConnection.readVariantInt
                )) ?? 5
            try Self.fprintd { try bus.call(Self.service, device, Self.deviceInterface, "EnrollStart", [name]) }
            var finished = false
            defer { if !finished { _ = try? bus.call(Self.service, device, Self.deviceInterface, "EnrollStop") } }
            var stage = 0
            progress(EnrolmentProgress(stage: 0, stages: stages, message: "touch the sensor"))
            while true {
                if cancelled() { throw CancellationError() }
                guard let status = bus.take("EnrollStatus") else {
                    try Self.checkStillRunning(bus)
                    try bus.process(waiting: 100_000)
                    continue
                }
                let result = status.strings.first ?? ""
                switch result {
                case "enroll-stage-passed":
                    stage += 1
                    progress(EnrolmentProgress(stage: stage, stages: stages, message: "lift and touch again"))
                case "enroll-completed":
                    finished = true
                    _ = try? bus.call(Self.service, device, Self.deviceInterface, "EnrollStop")
                    progress(EnrolmentProgress(stage: stages, stages: stages, message: "enrolled"))
                    return try Self.enrolledFingers(bus, device: device, user: user)
                case "enroll-duplicate":
                    throw DaemonError(.alreadyExists, "that finger is enrolled already (as another name)")
                case "enroll-data-full": throw DaemonError(.invalidParameter, "the reader's storage is full")
                case "enroll-disconnected":
                    throw DaemonError(.sensorFailed, "the fingerprint reader was disconnected during the enrolment")
                case "enroll-failed", "enroll-unknown-error":
                    throw DaemonError(.sensorFailed, "the fingerprint reader could not enrol (\(result))")
                default:
                    if let message = Self.retryMessages[result] {
                        progress(EnrolmentProgress(stage: stage, stages: stages, message: message))
                    } else {
                        throw DaemonError(.sensorFailed, "fprintd answered \(result.prefix(40)) during the enrolment")
                    }
                }
            }
        }
    }

    public func unenroll(uid: UInt32, name: String, stored: [String]) async throws -> [String] {
        let user = accountName(uid: uid)
        defer { forgetEnrolled(uid) }
        return try await worker.perform { holder, cancelled in
            let claim = try holder.claim(for: user, cancelled: cancelled)
            defer { holder.release() }
            let bus = claim.bus
            let device = claim.device
            do { try bus.call(Self.service, device, Self.deviceInterface, "DeleteEnrolledFinger", [name]) } catch let e
                as DaemonError where e.isDBusError("NoEnrolledPrints")
            {
                throw DaemonError(.notFound, "\"\(name)\" is not enrolled")
            } catch let e as DaemonError where e.isDBusError("InvalidFingername") {
                throw DaemonError(.notFound, "\"\(name)\" is not enrolled")
            }
            return try Self.enrolledFingers(bus, device: device, user: user)
        }
    }

    public func unenrollAll(uid: UInt32, stored: [String]) async throws -> [String] {
        let user = accountName(uid: uid)
        defer { forgetEnrolled(uid) }
        return try await worker.perform { holder, cancelled in
            let claim = try holder.claim(for: user, cancelled: cancelled)
            defer { holder.release() }
            let bus = claim.bus
            let device = claim.device
            do { try bus.call(Self.service, device, Self.deviceInterface, "DeleteEnrolledFingers2") } catch let e
                as DaemonError where e.isDBusError("NoEnrolledPrints")
            {}
            return []
        }
    }

    public func capture(uid: UInt32, retry: @escaping @Sendable (String) -> Void) async throws -> SensorReading {
        // The account's name is read on the worker too: the capture's own task runs on the
        // connection's event loop, where a slow name service must not stall other requests.
        try await worker.perform { holder, cancelled in
            let user = accountName(uid: uid)
            let claim = try holder.claim(for: user, presentUID: uid, cancelled: cancelled)
            do {
                let reading = try Self.verifyOnce(claim, uid: uid, cancelled: cancelled, retry: retry)
                // A match ends the evaluation; after a non-match the evaluation re-arms or disarms,
                // so the claim stays until it says which (idle release only as a safety net).
                if reading == .match { holder.release() } else { holder.keepIdle() }
                return reading
            } catch {
                holder.release()
                throw error
            }
        }
    }

    public func disarm(uid: UInt32) {
        worker.enqueue { holder in holder.release() }
    }

    /// One verify on a held claim: started only while `uid` is the user at the machine
    /// (`SessionPresence`, asked again every second), waited for, stopped.
    private static func verifyOnce(
        _ claim: FprintdClaim,
        uid: UInt32,
        cancelled: () -> Bool,
        retry: (String) -> Void
    ) throws -> SensorReading {
        let bus = claim.bus
        let device = claim.device
        let user = claim.user
        var presenceChecked = Date()
        func start() throws {
            bus.discardSignals()
            do { try bus.call(service, device, deviceInterface, "VerifyStart", ["any"]) } catch let e
                as DaemonError where e.isDBusError("NoEnrolledPrints")
            {
                throw DaemonError(.sensorFailed, "fprintd has no enrolled fingerprint for \(user)")
            } catch let e as DaemonError where e.code == .dbusCallFailed {
                throw DaemonError(.sensorFailed, "fprintd could not start verifying: \(e)")
            }
        }
        try start()
        // Stopped whatever happens; the final status a stop emits is never read.
        defer { _ = try? bus.call(service, device, deviceInterface, "VerifyStop") }
        while true {
            if cancelled() { throw CancellationError() }
            if Date().timeIntervalSince(presenceChecked) >= 1 {
                try requirePresence(bus, uid: uid)
                presenceChecked = Date()
            }
            guard let status = bus.take("VerifyStatus") else {
                try checkStillRunning(bus)
                try bus.process(waiting: 100_000)
                continue
            }
            let result = status.strings.first ?? ""
            switch result {
            case "verify-match": return .match
            case "verify-no-match": return .noMatch
            case "verify-disconnected": throw DaemonError(.sensorFailed, "the fingerprint reader was disconnected")
            default:
                guard let message = retryMessages[result.replacingOccurrences(of: "verify-", with: "enroll-")] else {
                    throw DaemonError(.sensorFailed, "the fingerprint reader failed (\(result.prefix(40)))")
                }
                retry(message)
                if status.flag == true {
                    // This verify is over: start another on the same claim.
                    _ = try? bus.call(service, device, deviceInterface, "VerifyStop")
                    try start()
                }
            }
        }
    }

    // MARK: Threads

    private static func onThisThread<T>(_ address: String?, _ body: (SdBusConnection) throws -> T) throws -> T {
        let bus: SdBusConnection
        do { bus = try SdBusConnection(address: address) } catch {
            throw DaemonError(.sensorFailed, "cannot reach fprintd on the D-Bus system bus (\(error))")
        }
        return try body(bus)
    }
}
