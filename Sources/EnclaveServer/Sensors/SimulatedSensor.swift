import EnclaveCore
import EnclaveProtocol
import Synchronization

/// A simulated Touch ID or Face ID sensor. Its enrolled identities live in the user's record; its
/// touches come from the scripted person (`PersonScript`: `simulate` requests, the testing kit)
/// and from the simulation keys of the terminal prompt and of prompt agents, placed on it by the
/// running evaluation while it is armed (`place`) and read by `capture` like a real reader's scan.
public final class SimulatedSensor: TouchableSensor {
    public let info: SensorInfo

    /// Per user: a touch not yet read, or the capture waiting for one. One evaluation per user
    /// holds the prompt, so a user has at most one capture at a time.
    private let slots = Mutex<[UInt32: Slot]>([:])
    private let waiterIDs = Atomic<UInt64>(0)

    private enum Slot {
        case placed(SensorReading)
        case waiting(id: UInt64, CheckedContinuation<SensorReading, any Error>)
    }

    public init(kind: BiometryKind) {
        precondition(kind == .touchID || kind == .faceID, "the simulator plays Touch ID or Face ID")
        info = SensorInfo(kind: kind, name: "Simulated \(kind.displayName)", simulated: true)
    }

    public func enrolledIdentities(uid: UInt32, stored: [String]) async throws -> [String] { stored }

    public func enroll(
        uid: UInt32,
        name: String,
        stored: [String],
        progress: @escaping @Sendable (EnrolmentProgress) -> Void
    ) async throws -> [String] {
        guard !stored.contains(name) else { throw DaemonError(.alreadyExists, "\"\(name)\" is already enrolled") }
        guard stored.count < 5 else { throw DaemonError(.invalidParameter, "at most 5 identities may be enrolled") }
        return stored + [name]
    }

    public func unenroll(uid: UInt32, name: String, stored: [String]) async throws -> [String] {
        guard stored.contains(name) else { throw DaemonError(.notFound, "\"\(name)\" is not enrolled") }
        return stored.filter { $0 != name }
    }

    public func unenrollAll(uid: UInt32, stored: [String]) async throws -> [String] { [] }

    public func capture(uid: UInt32, retry: @escaping @Sendable (String) -> Void) async throws -> SensorReading {
        let id = waiterIDs.wrappingAdd(1, ordering: .relaxed).oldValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SensorReading, any Error>) in
                enum Next {
                    case read(SensorReading)
                    case wait(replacing: CheckedContinuation<SensorReading, any Error>?)
                    case cancelled
                }
                let next = slots.withLock { slots -> Next in
                    if Task.isCancelled { return .cancelled }
                    switch slots[uid] {
                    case .placed(let reading)?:
                        slots[uid] = nil
                        return .read(reading)
                    case .waiting(_, let stale)?:
                        // A capture cancelled whose handler has not run yet: it ends now.
                        slots[uid] = .waiting(id: id, continuation)
                        return .wait(replacing: stale)
                    case nil:
                        slots[uid] = .waiting(id: id, continuation)
                        return .wait(replacing: nil)
                    }
                }
                switch next {
                case .read(let reading): continuation.resume(returning: reading)
                case .wait(let stale): stale?.resume(throwing: CancellationError())
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let waiting = slots.withLock { slots -> CheckedContinuation<SensorReading, any Error>? in
                guard case .waiting(id, let continuation)? = slots[uid] else { return nil }
                slots[uid] = nil
                return continuation
            }
            waiting?.resume(throwing: CancellationError())
        }
    }

    public func place(_ reading: SensorReading, uid: UInt32) -> Bool {
        enum Placed {
            case read(by: CheckedContinuation<SensorReading, any Error>)
            case lying, refused
        }
        let placed = slots.withLock { slots -> Placed in
            switch slots[uid] {
            case .waiting(_, let continuation)?:
                slots[uid] = nil
                return .read(by: continuation)
            case .placed?:
                return .refused
            case nil:
                slots[uid] = .placed(reading)
                return .lying
            }
        }
        switch placed {
        case .read(let continuation):
            continuation.resume(returning: reading)
            return true
        case .lying: return true
        case .refused: return false
        }
    }

    /// Whether a capture of `uid` waits for a touch (tests wait for it before they touch).
    func hasWaitingCapture(uid: UInt32) -> Bool {
        slots.withLock { if case .waiting? = $0[uid] { return true } else { return false } }
    }

    /// A touch nobody read is gone once the evaluation wants no more readings.
    public func disarm(uid: UInt32) {
        slots.withLock { slots in
            if case .placed? = slots[uid] { slots[uid] = nil }
        }
    }
}
