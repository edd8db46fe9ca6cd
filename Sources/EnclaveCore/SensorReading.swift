/// One reading from an armed sensor: what a real reader reports, and what a scripted touch is.
public enum SensorReading: Sendable, Equatable {
    case match
    case noMatch
}
