/// fprintd's enrolled lists, kept a short while: one evaluation reads the list several times (the
/// facts before and after waiting for the prompt, the domain state), and each read is a D-Bus round
/// trip. Our own enrolment changes and a restart of fprintd forget them at once; a change made with
/// another tool (GNOME Settings, fprintd-delete) is seen within `lifetime` seconds.
struct EnrolledListCache {
    static let lifetime: Double = 2

    private var entries: [String: (fingers: [String], at: Double)] = [:]
    /// Moves on with every forgetting, so a read that started before a change never stores its
    /// older answer after it.
    private(set) var generation: UInt64 = 0

    func fingers(of user: String, now: Double) -> [String]? {
        guard let entry = entries[user], now >= entry.at, now - entry.at < Self.lifetime else { return nil }
        return entry.fingers
    }

    /// Keeps what a read that started at `at`, in `generation`, found.
    mutating func store(_ fingers: [String], of user: String, at: Double, generation: UInt64) {
        guard generation == self.generation else { return }
        entries[user] = (fingers, at)
    }

    mutating func forget(_ user: String) {
        entries[user] = nil
        generation += 1
    }

    mutating func forgetAll() {
        entries.removeAll()
        generation += 1
    }
}
