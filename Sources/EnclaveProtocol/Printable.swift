import Foundation

/// What lactl prints, and what the daemon draws on a person's terminal, comes partly from others: app paths, item labels and accounts, group and
/// identity names, the daemon's messages. Any of them may carry terminal control sequences (a
/// title change, a screen clear, an 8-bit CSI, a bidi override that reverses what follows), and in
/// system mode the terminal is root's. Every human-readable line goes through here: those
/// characters are shown as `\u{1B}` and never reach the terminal as themselves.
public enum Printable {
    /// `text` with every control character escaped; newlines and tabs too when `singleLine`.
    public static func escaped(_ text: String, singleLine: Bool = false) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if isControl(scalar, keepLayout: !singleLine) {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// One field of someone else's text inside a line: it cannot start a line of its own either.
    public static func field(_ text: String) -> String { escaped(text, singleLine: true) }

    /// JSON text with the control characters JSONEncoder leaves as they are (DEL, C1, bidi) written
    /// as JSON's own `\u00XX` escapes: still the same JSON, and nothing a terminal would obey. (They
    /// can only stand inside strings: everything structural in JSON is plain ASCII.)
    public static func json(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value >= 0x20, isControl(scalar, keepLayout: true) {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar, keepLayout: Bool) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: return !keepLayout
        case 0x00...0x1F, 0x7F...0x9F: return true
        // Bidirectional embeddings, overrides and isolates, and the Arabic letter mark.
        case 0x202A...0x202E, 0x2066...0x2069, 0x061C, 0x200E, 0x200F: return true
        default: return false
        }
    }
}
