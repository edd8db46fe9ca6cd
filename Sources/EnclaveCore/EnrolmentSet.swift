/// Enrolled identities as the sensor reports them. fprintd lists a user's fingers in no promised
/// order; an order change is not an enrolment change (it would wrongly invalidate every
/// `.biometryCurrentSet` item, key and domain state). Names are compared as a set.
public enum EnrolmentSet {
    /// Whether the sensor's list `now` is a different enrolment from the one `stored`.
    public static func changed(from stored: [String], to now: [String]) -> Bool {
        // The same list, the common answer (a simulated sensor's is the stored one): no sets made.
        guard stored != now else { return false }
        return Set(stored) != Set(now) || stored.count != now.count
    }
}
