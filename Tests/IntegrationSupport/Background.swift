import Foundation

/// A command run on a thread of its own while the test acts as the person.
public final class Background: @unchecked Sendable {
    // Safe: `result` is written once on the thread, and read only after `done` says so.
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<ProcessOutput, Error>?

    public init(_ body: @escaping @Sendable () throws -> ProcessOutput) {
        Thread { [self] in
            result = Result { try body() }
            done.signal()
        }.start()
    }

    public func wait() throws -> ProcessOutput {
        done.wait()
        return try result!.get()
    }
}
