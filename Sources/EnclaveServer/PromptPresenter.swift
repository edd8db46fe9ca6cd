import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

/// Where a prompt's screens are drawn and the person's answers read: the graphical agent of the
/// app's session (`AgentPrompt`), the terminal the app handed (`TerminalPrompt`), or nowhere
/// (`HeadlessPrompt`: the screens go to the app, and only the sensor or a simulated person can
/// answer). The daemon's order is that one: agent, terminal, headless.
protocol PromptPresenter: AnyObject, Sendable {
    func show(_ screen: PromptScreen)
    /// Ends the prompt with its outcome's line.
    func close(result: String) async
}

extension TerminalPrompt: PromptPresenter {}

/// No presenter in the daemon: the screens go to the client as `prompt` replies to its request.
final class HeadlessPrompt: PromptPresenter {
    private let sink: any ReplySink
    private let requestID: UInt64

    init(sink: any ReplySink, requestID: UInt64) {
        self.sink = sink
        self.requestID = requestID
    }

    func show(_ screen: PromptScreen) { sink.send(ReplyEnvelope(id: requestID, reply: .prompt(screen))) }
    func close(result: String) async {}
}

/// A prompt that starts on the agent and moves to the next presenter if the agent is lost (it did
/// not say its window is up in time, or its connection closed): the next one gets the screen the
/// agent had, so the person can still answer, and nothing is counted for the move. With no next
/// presenter (administration without a terminal), `exhausted` says the prompt ended.
final class PromptRoute: PromptPresenter, Sendable {
    private struct Route {
        var current: (any PromptPresenter)?
        var next: (@Sendable () -> (any PromptPresenter)?)?
        var lastScreen: PromptScreen?
        /// Screens shown so far: a move re-shows the last one only if none came after it.
        var shown = 0
        var closed = false

        mutating func takeNext() -> (any PromptPresenter)? {
            defer { next = nil }
            return next?()
        }
    }
    private let route: Mutex<Route>
    private let exhausted: @Sendable () -> Void

    private init(next: @escaping @Sendable () -> (any PromptPresenter)?, exhausted: @escaping @Sendable () -> Void) {
        route = Mutex(Route(next: next))
        self.exhausted = exhausted
    }

    /// The route of one prompt: on the agent when one serves (its answers go to `onAction`),
    /// else on `next()`.
    static func starting(
        on agent: PromptAgent?,
        onAction: @escaping PromptAgent.OnAction,
        then next: @escaping @Sendable () -> (any PromptPresenter)?,
        exhausted: @escaping @Sendable () -> Void
    ) -> PromptRoute {
        let route = PromptRoute(next: next, exhausted: exhausted)
        // The agent may be lost at once, even before `open` returns: the move then comes first,
        // and the agent's prompt is never installed.
        let onAgent = agent?.open(
            onAction: onAction,
            onLost: { [weak route] in
                guard let route else { return }
                Task { await route.moveOn() }
            }
        )
        let none = route.route.withLock { route in
            if route.current == nil, !route.closed {
                if let onAgent { route.current = onAgent } else { route.current = route.takeNext() }
            }
            return route.current == nil && !route.closed
        }
        if none { exhausted() }
        return route
    }

    func show(_ screen: PromptScreen) {
        let presenter = route.withLock { route -> (any PromptPresenter)? in
            guard !route.closed else { return nil }
            route.lastScreen = screen
            route.shown += 1
            return route.current
        }
        presenter?.show(screen)
    }

    func close(result: String) async {
        let presenter = route.withLock { route -> (any PromptPresenter)? in
            route.closed = true
            return route.current
        }
        await presenter?.close(result: result)
    }

    /// The first presenter is lost: the next one takes the prompt, with its last screen.
    func moveOn() async {
        let moved = route.withLock { route -> (old: (any PromptPresenter)?, new: (any PromptPresenter)?, count: Int)? in
            guard !route.closed, route.next != nil else { return nil }
            let old = route.current
            route.current = route.takeNext()
            return (old, route.current, route.shown)
        }
        guard let moved else { return }
        await moved.old?.close(result: "moved on")
        guard let new = moved.new else { return exhausted() }
        // A screen shown since the move went to the new presenter already.
        let screen = route.withLock { $0.closed || $0.shown != moved.count ? nil : $0.lastScreen }
        if let screen { new.show(screen) }
    }
}
