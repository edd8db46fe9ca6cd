import EnclaveProtocol

/// The person's keys on the trusted terminal prompt, one byte at a time, turned into what the
/// evaluation hears. Keys: the passcode then Enter; Backspace; Ctrl-U clears; Esc or Ctrl-C
/// cancels; Ctrl-F is the fallback button; Ctrl-R "Try Face ID Again"; with a simulated sensor
/// Ctrl-T is a matching touch and Ctrl-N a non-matching one. Keys a screen does not offer do nothing.
public struct PromptKeyboard: Sendable {
    public enum Action: Sendable, Equatable, CustomStringConvertible {
        case cancel, fallback, retry, simulatedMatch, simulatedNoMatch
        case passcode(String)
        /// ESC: a key of its own (cancel), or the start of an arrow key's sequence — only the
        /// shell can tell, by whether more bytes follow at once.
        case escape

        public var description: String {
            switch self {
            case .passcode: return "passcode(••••)"
            case .cancel: return "cancel"
            case .fallback: return "fallback"
            case .retry: return "retry"
            case .simulatedMatch: return "simulatedMatch"
            case .simulatedNoMatch: return "simulatedNoMatch"
            case .escape: return "escape"
            }
        }
    }

    private var typed: [UInt8] = []

    public init() {}

    /// How many characters are typed (the prompt may show as many dots; never what they are).
    public var typedCount: Int { typed.count }

    public mutating func key(_ byte: UInt8, on screen: PromptScreen?) -> Action? {
        switch byte {
        case 3: return .cancel
        case 27: return .escape
        case 6: return Self.offered(.fallback, on: screen)
        case 18: return Self.offered(.retry, on: screen)
        case 20: return Self.offered(.simulatedMatch, on: screen)
        case 14: return Self.offered(.simulatedNoMatch, on: screen)
        case 13, 10:
            defer { clear() }
            return Self.offered(.passcode(String(decoding: typed, as: UTF8.self)), on: screen)
        case 127, 8:
            if !typed.isEmpty {
                typed[typed.count - 1] = 0
                typed.removeLast()
            }
            return nil
        case 21:
            clear()
            return nil
        default:
            if byte >= 32, screen?.passcodeEntry == true, typed.count < WireLimits.maxPasscodeBytes {
                typed.append(byte)
            }
            return nil
        }
    }

    /// `action` when `screen` offers it now, else nil: the one rule for the terminal's keys and the
    /// prompt agent's answers. Cancel is always offered; a passcode only while one is accepted, not
    /// empty and within the wire's limit.
    public static func offered(_ action: Action, on screen: PromptScreen?) -> Action? {
        let offers: Bool
        switch action {
        case .cancel, .escape: offers = true
        case .fallback: offers = screen?.fallbackTitle != nil
        case .retry: offers = screen?.retryOffered == true
        case .simulatedMatch, .simulatedNoMatch: offers = screen?.sensorSimulated == true && screen?.sensorArmed == true
        case .passcode(let p):
            offers = screen?.passcodeEntry == true && !p.isEmpty && p.utf8.count <= WireLimits.maxPasscodeBytes
        }
        return offers ? action : nil
    }

    /// Forgets what was typed, overwriting it first.
    public mutating func clear() {
        for i in typed.indices { typed[i] = 0 }
        typed.removeAll()
    }
}

/// The text of the trusted terminal prompt. The app's name and reason and its button titles are
/// the app's own strings: they are escaped (`Printable`), so no app can move the cursor, clear
/// the screen or repaint the prompt with its text.
public enum PromptText {
    /// The lines for `screen`; `first` adds the heading of a new prompt.
    public static func lines(_ s: PromptScreen, first: Bool) -> [String] {
        var lines: [String] = []
        if first {
            lines.append("")
            lines.append("┌─ \(Printable.field(s.app)) \(s.heading)")
            lines.append("│  \(Printable.field(s.reason))")
        }
        lines.append("│  \(Printable.field(s.instruction))")
        var keys: [String] = []
        if s.passcodeEntry { keys.append("type the \(s.secretName ?? "passcode") + Enter") }
        if s.retryOffered { keys.append("Ctrl-R: Try \(s.sensorName ?? "Again") Again") }
        if let f = s.fallbackTitle { keys.append("Ctrl-F: \(Printable.field(f))") }
        keys.append("Esc: \(Printable.field(s.cancelTitle))")
        lines.append("│  [" + keys.joined(separator: " · ") + "]")
        if let warning = s.warning { lines.append("│  \(warning)") }
        if s.sensorSimulated && s.sensorArmed {
            lines.append("│  simulated \(s.sensorName ?? "sensor"): Ctrl-T matching touch · Ctrl-N non-matching touch")
        }
        return lines
    }

    public static let checking = "│  checking…"

    public static func closing(_ result: String) -> String { "└─ " + Printable.field(result) }
}
