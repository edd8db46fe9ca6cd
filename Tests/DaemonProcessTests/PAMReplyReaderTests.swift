import Foundation
import IntegrationSupport
import XCTest

/// The module's reply reader (`pam/laenclave_reply.c`: it runs inside sudo), checked in C: its
/// rules row by row, then a fuzzer (libFuzzer, with the address and undefined-behaviour
/// sanitizers) over what a daemon could send.
final class PAMReplyReaderTests: XCTestCase {
    private let pam = PAMModuleBench.repository + "/pam"

    /// The toolchain's clang (it carries libFuzzer), beside swift on the PATH.
    private func clang() throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        let directories = path.filter { FileManager.default.isExecutableFile(atPath: "\($0)/swift") } + path
        for directory in directories where FileManager.default.isExecutableFile(atPath: "\(directory)/clang") {
            return "\(directory)/clang"
        }
        throw XCTSkip("needs the Swift toolchain's clang")
    }

    private func build(_ sources: [String], flags: [String], to output: String) throws {
        let built = try runProcess(
            try clang(),
            ["-std=c99", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fno-sanitize-recover=all"] + flags + sources
                + ["-o", output],
            timeout: 120
        )
        XCTAssertEqual(built.status, 0, built.stderr)
    }

    func testTheReaderTakesOnlyWholeRepliesAndReadsThemRight() throws {
        let binary = NSTemporaryDirectory() + "reply-table-\(getpid())"
        defer { unlink(binary) }
        try build(
            ["\(pam)/tests/reply_table.c", "\(pam)/laenclave_reply.c"],
            flags: ["-fsanitize=address,undefined"],
            to: binary
        )
        let run = try runProcess(binary, [])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
    }

    func testNoInputCrashesTheReaderOrReadsOutsideItsBuffers() throws {
        let directory = NSTemporaryDirectory() + "reply-fuzz-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory + "/corpus", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seeds = [
            #"{"id":1,"reply":{"kind":"hello","value":{"version":1,"mode":"system","uid":0,"app":"x"}}}"#,
            #"{"id":2,"reply":{"kind":"handoffTicket","value":"AAECAwQFBgcICQoLDA0ODw=="}}"#,
            #"{"id":3,"reply":{"kind":"prompt","value":{"instruction":"Touch ID \u2014 \"now\"","app":"sudo"}}}"#,
            #"{"id":3,"reply":{"kind":"pamAuthenticated","value":{"outcome":"locked","message":"delayed"}}}"#,
            #"{"id":3,"reply":{"kind":"failure","value":{"code":"notPermitted","message":"no","retryAfter":1.5e1}}}"#,
        ]
        for (i, seed) in seeds.enumerated() {
            try seed.write(toFile: "\(directory)/corpus/seed\(i)", atomically: true, encoding: .utf8)
        }
        let fuzzer = directory + "/fuzz"
        try build(
            ["\(pam)/tests/reply_fuzz.c", "\(pam)/laenclave_reply.c"],
            flags: ["-fsanitize=fuzzer,address,undefined"],
            to: fuzzer
        )
        let run = try runProcess(
            fuzzer,
            ["-runs=300000", "-max_len=1024", "-seed=1", "-artifact_prefix=\(directory)/", directory + "/corpus"],
            timeout: 300
        )
        XCTAssertEqual(run.status, 0, String(run.stderr.suffix(4000)))
    }
}
