/// Whether the person a prompt is for is at the machine, as logind says: the reader is armed only
/// for a user whose state is `active` (a session of theirs is in the foreground of a seat), and a
/// capture ends when that stops being so. fprintd applies the same rule to its own clients (polkit
/// `allow_active`); the daemon asks on its users' behalf, so it must apply it itself — or a user
/// with only an ssh or cron session could arm the reader, keep it from the person at the console,
/// and take their touch for a request they never saw.
public enum SessionPresence {
    /// `state`: logind's `User.State` for the uid (nil: no such user in logind, or no logind).
    public static func mayArmReader(userState state: String?) -> Bool { state == "active" }

    public static func refusal(uid: UInt32, userState state: String?) -> String {
        "the fingerprint reader is armed only for the user at the machine: logind reports \(state.map { "uid \(uid) as \($0)" } ?? "no session for uid \(uid)"), not active on a seat"
    }
}
