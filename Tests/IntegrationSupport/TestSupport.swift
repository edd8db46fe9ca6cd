import Foundation
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A product built beside the test bundle (lactl, laenclaved).
public func productPath(_ name: String) -> String {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return (me as NSString).deletingLastPathComponent + "/" + name
}

public struct ProcessOutput {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a program to completion (stdin from `input`), as a headless client unless `headless` is
/// false. A program still running after `timeout` seconds is killed (with its process group) and
/// the test fails: a hung child must never hang the test run.
@discardableResult
public func runProcess(
    _ path: String,
    _ arguments: [String],
    input: String = "",
    environment: [String: String]? = nil,
    headless: Bool = true,
    timeout: Double = 60,
    file: StaticString = #filePath,
    line: UInt = #line
) throws -> ProcessOutput {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    var env = environment ?? ProcessInfo.processInfo.environment
    if headless { env["LA_PROMPT"] = "headless" } else { env["LA_PROMPT"] = nil }
    p.environment = env
    let out = Pipe()
    let err = Pipe()
    let inp = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = inp
    try p.run()
    let pid = p.processIdentifier
    let timedOut = TimeoutFlag()
    let killer = DispatchWorkItem {
        timedOut.set()
        kill(-pid, SIGKILL)  // Foundation starts the child in a process group of its own
        kill(pid, SIGKILL)
    }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
    defer { killer.cancel() }
    inp.fileHandleForWriting.write(Data(input.utf8))
    try inp.fileHandleForWriting.close()
    // Both pipes at once: a child that fills one while we wait on the other would never finish.
    let errData = ReadBox()
    let readingErr = DispatchGroup()
    DispatchQueue.global().async(group: readingErr) { errData.data = err.fileHandleForReading.readDataToEndOfFile() }
    let o = out.fileHandleForReading.readDataToEndOfFile()
    readingErr.wait()
    p.waitUntilExit()
    if timedOut.isSet {
        XCTFail(
            "\(path) \(arguments.joined(separator: " ")) did not finish within \(timeout) s",
            file: file,
            line: line
        )
    }
    return ProcessOutput(
        status: p.terminationStatus,
        stdout: String(decoding: o, as: UTF8.self),
        stderr: String(decoding: errData.data, as: UTF8.self)
    )
}

private final class TimeoutFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

private final class ReadBox: @unchecked Sendable {
    var data = Data()
}

/// SIGTERM to a child started with `DaemonLauncher.spawn`, then SIGKILL if it is still there
/// after `grace` seconds; reaps it either way.
public func terminateAndWait(_ pid: pid_t, grace: Double = 10) {
    kill(pid, SIGTERM)
    let deadline = Date().addingTimeInterval(grace)
    var status: Int32 = 0
    while Date() < deadline {
        if waitpid(pid, &status, WNOHANG) != 0 { return }
        usleep(10_000)
    }
    kill(pid, SIGKILL)
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
}

/// Waits until `condition` holds (polling), failing the test after `timeout` seconds.
public func eventually(
    _ what: String,
    timeout: Double = 10,
    file: StaticString = #filePath,
    line: UInt = #line,
    _ condition: () throws -> Bool
) rethrows {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return }
        usleep(10_000)
    }
    XCTFail("timed out waiting for: \(what)", file: file, line: line)
}

/// Evaluates and returns the LAError code, or nil on success.
public func evaluate(_ context: LAContext, _ policy: LAPolicy, reason: String = "Test") async -> LAError.Code? {
    do {
        _ = try await context.evaluatePolicy(policy, localizedReason: reason)
        return nil
    } catch let e as LAError {
        return e.code
    } catch {
        XCTFail("evaluatePolicy threw a non-LAError: \(error)")
        return .systemCancel
    }
}

public func canEvaluate(_ context: LAContext, _ policy: LAPolicy) -> LAError.Code? {
    var error: NSError?
    if context.canEvaluatePolicy(policy, error: &error) { return nil }
    guard let error, let e = LAError(error) else { return .systemCancel }
    return e.code
}

extension TestEnclave.Configuration {
    public static func with(_ change: (inout TestEnclave.Configuration) -> Void) -> TestEnclave.Configuration {
        var c = TestEnclave.Configuration()
        change(&c)
        return c
    }
}
