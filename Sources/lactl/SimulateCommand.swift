import ArgumentParser
import EnclaveProtocol

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue what a person does at the simulated sensor and prompt.",
        discussion: """
            Events run in order against the next evaluations: match, nomatch, cancel, fallback, retry \
            (Face ID's "Try Again"), passcode=VALUE (typed on the prompt). Example: \
            lactl simulate nomatch nomatch match
            """
    )
    @OptionGroup var client: ClientOptions
    @Argument(help: "Events: match, nomatch, cancel, fallback, retry, passcode=VALUE.") var events: [String] = []
    @Flag(help: "Empty the queue instead.") var clear = false

    func run() throws {
        if clear {
            _ = try client.call(.clearSimulated)
            return print("queue cleared")
        }
        guard !events.isEmpty else { throw ValidationError("name at least one event") }
        let parsed = try events.map { word -> SimulatedEvent in
            if word.hasPrefix("passcode=") { return .passcode(String(word.dropFirst("passcode=".count))) }
            guard let kind = SimulatedEvent.Kind(rawValue: word), kind != .passcode else {
                throw ValidationError(
                    "unknown event \"\(word)\"; use match, nomatch, cancel, fallback, retry or passcode=VALUE"
                )
            }
            return SimulatedEvent(kind)
        }
        _ = try client.call(.simulate(.init(events: parsed)))
        print("queued: \(parsed.map(\.description).joined(separator: " "))")
    }
}
