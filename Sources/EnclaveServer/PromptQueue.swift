/// One prompt per user at a time: who holds it and who waits, first come first served. A waiter
/// that gives up (its timeout, its client gone) leaves the line without the prompt.
struct PromptQueue {
    private var held = false
    private var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextID: UInt64 = 0

    /// Takes the prompt if it is free (nil), else the ticket to wait with.
    mutating func enter() -> UInt64? {
        guard held else {
            held = true
            return nil
        }
        defer { nextID += 1 }
        return nextID
    }

    mutating func wait(_ id: UInt64, _ continuation: CheckedContinuation<Bool, Never>) {
        waiters.append((id, continuation))
    }

    /// The waiter leaves the line without the prompt (a no-op once it was handed the prompt).
    mutating func drop(_ id: UInt64) {
        if let i = waiters.firstIndex(where: { $0.id == id }) {
            waiters.remove(at: i).continuation.resume(returning: false)
        }
    }

    /// The holder is done: the first waiter gets the prompt, or it is free.
    mutating func leave() {
        if waiters.isEmpty { held = false } else { waiters.removeFirst().continuation.resume(returning: true) }
    }
}
