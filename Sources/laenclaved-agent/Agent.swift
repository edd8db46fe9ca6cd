import ArgumentParser
import CPromptWindow
import EnclaveClient
import EnclaveProtocol
import Foundation

/// laenclaved's graphical prompt: started by the person's graphical session (an XDG autostart
/// entry, or the systemd user unit `laenclaved-agent.service`), it offers the daemon to draw the
/// prompts of the apps in its session. The daemon admits it only as the installed agent executable
/// (the kernel's word, not ours), sends it each screen, and reads the person's answers from it: the
/// passcode goes from this window to the daemon and never through the app that asked.
@main
struct LAEnclavedAgent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "laenclaved-agent",
        abstract: "Draw laenclaved's prompts in the graphical session (GTK 4) and read the person's answers."
    )

    @Option(
        help:
            "The daemon's socket (default: as apps find it: $LAENCLAVED_SOCKET, the system daemon's, else the user daemon's, started if needed)."
    )
    var socket: String?

    func run() throws {
        guard la_prompt_init() != 0 else {
            throw ValidationError("no graphical display (neither $WAYLAND_DISPLAY nor $DISPLAY opens)")
        }
        // The agent logs why it has no daemon in its own words, each time it retries.
        DaemonDiagnostics.writesToStandardError = false
        var endpoint = EnclaveEndpoint.resolve()
        if let socket { endpoint = EnclaveEndpoint(socketPath: socket, autostart: false, headless: true) }
        let agent = AgentSession(endpoint: endpoint)
        la_prompt_set_handler(
            { prompt, action, passcode, context in
                Unmanaged<AgentSession>.fromOpaque(context!).takeUnretainedValue().answer(prompt, action, passcode)
            },
            Unmanaged.passUnretained(agent).toOpaque()
        )
        let serving = Thread { agent.serve() }
        serving.name = "laenclaved-agent.daemon"
        serving.start()
        la_prompt_run()
    }
}
