import EnclaveProtocol

/// A simulated Touch ID or Face ID sensor. Its enrolled identities live in the user's record; its
/// touches come from the scripted person (`simulate` requests, the testing kit, the terminal
/// prompt's simulation keys), which the user's session feeds to the evaluation in queue order —
/// so `capture` itself never produces a reading.
public struct SimulatedSensor: BiometricSensor {
    public let info: SensorInfo

    public init(kind: BiometryKind) {
        precondition(kind == .touchID || kind == .faceID, "the simulator plays Touch ID or Face ID")
        info = SensorInfo(kind: kind, name: "Simulated \(kind.displayName)", simulated: true)
    }

    public func enrolledIdentities(uid: UInt32, stored: [String]) async throws -> [String] { stored }

    public func enroll(uid: UInt32, name: String, stored: [String], progress: @escaping @Sendable (EnrolmentProgress) -> Void) async throws -> [String] {
        guard !stored.contains(name) else { throw Failure(.alreadyExists, "\"\(name)\" is already enrolled") }
        guard stored.count < 5 else { throw Failure(.invalidParameter, "at most 5 identities may be enrolled") }
        return stored + [name]
    }

    public func unenroll(uid: UInt32, name: String, stored: [String]) async throws -> [String] {
        guard stored.contains(name) else { throw Failure(.notFound, "\"\(name)\" is not enrolled") }
        return stored.filter { $0 != name }
    }

    public func unenrollAll(uid: UInt32, stored: [String]) async throws -> [String] { [] }

    public func capture(uid: UInt32, retry: @escaping @Sendable (String) -> Void) async throws -> SensorReading {
        while true { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
    }
}
