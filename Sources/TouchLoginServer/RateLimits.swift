/// What the server limits, and how hard (our choices, after NIST SP 800-63B §5.2.2 and OWASP's
/// authentication guidance):
/// - every request that creates an account or starts or finishes a login takes a token from its
///   client address's bucket (IPv6 per /64): 60 at once, 60 a minute — in memory, per instance;
/// - a wrong password slows down further password attempts for that username (after 5 failures each
///   attempt waits 5 s, doubling to 60 s; after 100 consecutive failures the password path locks until the owner
///   logs in with a passkey or an operator lifts it) and, harder, for that address and username
///   (after 5, 2 s doubling
///   to 15 min). Unknown usernames are counted the same way, so the
///   answers do not tell which accounts exist. Kept in the store, shared by every instance, and
///   counted *before* the password is checked, so parallel guesses cannot outrun the count;
/// - a password typed inside a session, or sent with a client token from an earlier password
///   login (`PasswordBudget`), is judged on that session's or token's own record instead: 5 free
///   failures, then 5 s doubling to 60 s, a lock after 10 — so the username's waits and lock,
///   which anyone can run up, never stop the owner's own clients;
/// - a refused passkey assertion costs a token from a bucket of 10 refilling one per 30 s, kept
///   per address *and* the credential it claims (so a forger behind a shared address spends only
///   their own), and never counts against the account: a signature cannot be guessed, so an
///   account limit would only let anyone lock the owner out.
public struct RateLimits: Sendable, Equatable {
    public var perAddress = TokenBuckets.Rule.perMinute(60)
    public var passwordPerAccount = FailureSchedule(freeFailures: 5, firstDelay: 5, maxDelay: 60, lockAfter: 100)
    public var passwordPerAddressAndAccount = FailureSchedule(freeFailures: 5, firstDelay: 2, maxDelay: 900)
    public var passwordPerProof = FailureSchedule(freeFailures: 5, firstDelay: 5, maxDelay: 60, lockAfter: 10)
    public var passkeyFailuresPerAddress = TokenBuckets.Rule(capacity: 10, refillPerSecond: 1.0 / 30)
    public init() {}
}
