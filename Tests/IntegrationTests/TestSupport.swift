import Foundation
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A product built beside the test bundle (lactl, laenclaved).
func productPath(_ name: String) -> String {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return (me as NSString).deletingLastPathComponent + "/" + name
}

struct ProcessOutput {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to completion with no terminal (stdin from `input`).
@discardableResult
func runProcess(_ path: String, _ arguments: [String], input: String = "", environment: [String: String]? = nil) throws -> ProcessOutput {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    var env = environment ?? ProcessInfo.processInfo.environment
    env["LA_PROMPT"] = "headless"
    p.environment = env
    let out = Pipe(), err = Pipe(), inp = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = inp
    try p.run()
    inp.fileHandleForWriting.write(Data(input.utf8))
    try inp.fileHandleForWriting.close()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return ProcessOutput(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
}

/// Waits until `condition` holds (polling), failing the test after `timeout` seconds.
func eventually(_ what: String, timeout: Double = 10, file: StaticString = #filePath, line: UInt = #line, _ condition: () throws -> Bool) rethrows {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return }
        usleep(10_000)
    }
    XCTFail("timed out waiting for: \(what)", file: file, line: line)
}

/// Evaluates and returns the LAError code, or nil on success.
func evaluate(_ context: LAContext, _ policy: LAPolicy, reason: String = "Test") async -> LAError.Code? {
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

func canEvaluate(_ context: LAContext, _ policy: LAPolicy) -> LAError.Code? {
    var error: NSError?
    if context.canEvaluatePolicy(policy, error: &error) { return nil }
    guard let error, let e = LAError(error) else { return .systemCancel }
    return e.code
}

extension TestEnclave.Configuration {
    static func with(_ change: (inout TestEnclave.Configuration) -> Void) -> TestEnclave.Configuration {
        var c = TestEnclave.Configuration()
        change(&c)
        return c
    }
}
