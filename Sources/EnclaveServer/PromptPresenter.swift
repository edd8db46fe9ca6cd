import EnclaveCore
import EnclaveProtocol
import Foundation

/// Where a prompt's screens are drawn and the person's answers read: the graphical agent of the
/// app's session (`AgentPrompt`), the terminal the app handed (`TerminalPrompt`), or nowhere
/// (`HeadlessPrompt`: the screens go to the app, and only the sensor or a simulated person can
/// answer). The daemon's order is that one: agent, terminal, headless.
protocol PromptPresenter: AnyObject, Sendable {
    func show(_ screen: PromptScreen) async
    /// Ends the prompt with its outcome's line.
    func close(result: String) async
}

extension TerminalPrompt: PromptPresenter {}

/// No presenter in the daemon: the screens go to the client as `prompt` replies to its request.
final class HeadlessPrompt: PromptPresenter {
    private let sink: any ReplySink
    private let requestID: UInt64

    init(sink: any ReplySink, requestID: UInt64) { self.sink = sink; self.requestID = requestID }

    func show(_ screen: PromptScreen) async { await sink.send(ReplyEnvelope(id: requestID, reply: .prompt(screen))) }
    func close(result: String) async {}
}

/// A prompt that starts on the agent and moves to the next presenter if the agent is lost (it did
/// not say its window is up in time, or its connection closed): the next one gets the screen the
/// agent had, so the person can still answer, and nothing is counted for the move.
final class PromptRoute: PromptPresenter, @unchecked Sendable {
    private let lock = NSLock()
    private var current: any PromptPresenter
    private var next: (() -> any PromptPresenter)?
    private var lastScreen: PromptScreen?
    private var closed = false

    init(first: any PromptPresenter, then next: (() -> any PromptPresenter)?) {
        current = first; self.next = next
    }

    /// A route that starts on `next()` itself.
    convenience init(_ only: any PromptPresenter) { self.init(first: only, then: nil) }

    /// Builds the route: `makeFirst` gets the callback that moves the prompt on.
    static func starting(with makeFirst: (@escaping @Sendable () -> Void) -> (any PromptPresenter)?,
                         then next: @escaping () -> any PromptPresenter) -> PromptRoute {
        let box = RouteBox()
        guard let first = makeFirst({ if let route = box.route { Task { await route.moveOn() } } }) else { return PromptRoute(next()) }
        let route = PromptRoute(first: first, then: next)
        box.route = route
        return route
    }

    func show(_ screen: PromptScreen) async {
        let presenter = lock.withLock { () -> (any PromptPresenter)? in
            guard !closed else { return nil }
            lastScreen = screen
            return current
        }
        await presenter?.show(screen)
    }

    func close(result: String) async {
        let presenter = lock.withLock { () -> any PromptPresenter in closed = true; return current }
        await presenter.close(result: result)
    }

    /// The first presenter is lost: the next one takes the prompt, with its last screen.
    func moveOn() async {
        let moved = lock.withLock { () -> (old: any PromptPresenter, new: any PromptPresenter, screen: PromptScreen?)? in
            guard !closed, let make = next else { return nil }
            next = nil
            let old = current
            current = make()
            return (old, current, lastScreen)
        }
        guard let moved else { return }
        await moved.old.close(result: "moved on")
        if let screen = moved.screen { await moved.new.show(screen) }
    }
}

/// Lets the first presenter's loss reach the route made after it.
private final class RouteBox: @unchecked Sendable {
    private let lock = NSLock()
    private weak var _route: PromptRoute?
    var route: PromptRoute? {
        get { lock.withLock { _route } }
        set { lock.withLock { _route = newValue } }
    }
}
