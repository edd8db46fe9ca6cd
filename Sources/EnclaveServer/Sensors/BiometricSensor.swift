import EnclaveCore
import EnclaveProtocol

/// A biometric sensor the daemon owns. Each kind (simulated Touch ID / Face ID, fprintd) is one file
/// behind this protocol; the rules never see which one is in use.
public protocol BiometricSensor: Sendable {
    var info: SensorInfo { get }
    /// Identities currently enrolled for the user. `stored` is the list the daemon last saved, which
    /// is the truth for a simulated sensor and a cache for a real one.
    func enrolledIdentities(uid: UInt32, stored: [String]) async throws -> [String]
    /// Enrols one identity and returns the new list. A real reader reports its stages through
    /// `progress` as they pass.
    func enroll(
        uid: UInt32,
        name: String,
        stored: [String],
        progress: @escaping @Sendable (EnrolmentProgress) -> Void
    ) async throws -> [String]
    func unenroll(uid: UInt32, name: String, stored: [String]) async throws -> [String]
    func unenrollAll(uid: UInt32, stored: [String]) async throws -> [String]
    /// Arms the sensor and waits for one reading. A scan the sensor could not read ("finger not
    /// centred") is not a reading and not a failed attempt: it goes to `retry` for the person to
    /// see, and the sensor stays armed. Cancelling the task disarms it at once.
    func capture(uid: UInt32, retry: @escaping @Sendable (String) -> Void) async throws -> SensorReading
    /// The evaluation wants no more readings (it ended, or moved on to the passcode). A real reader
    /// keeps the device between the captures of one evaluation and lets go of it here. Returns at
    /// once; the release follows the captures already asked for.
    func disarm(uid: UInt32)
}

extension BiometricSensor {
    /// A sensor that holds nothing between captures has nothing to let go of.
    public func disarm(uid: UInt32) {}
}

/// A sensor a scripted person can touch: a touch placed while a capture is armed is that
/// capture's reading.
public protocol TouchableSensor: BiometricSensor {
    /// Puts a finger or face on `uid`'s sensor. It is read by the capture that is armed, or by
    /// the next one if the capture has not yet begun to wait; `disarm` takes it away unread.
    /// False when a touch already lies there unread.
    func place(_ reading: SensorReading, uid: UInt32) -> Bool
}
