import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// One user's flood of connections: bounded per user and in all, a deadline for hello, and every
/// other user still served.
final class ConnectionFloodTests: XCTestCase {
    func testAUserOverTheirConnectionLimitIsRefusedUntilOneCloses() throws {
        let enclave = try TestEnclave(.with { $0.extraArguments = ["--max-connections-per-user", "5"] })
        // The kit's own control connection is one of the five.
        _ = try enclave.status()
        // Each held connection is counted before the next one opens: hello answered.
        var held: [RawClient] = []
        for id in 1...4 {
            let client = try RawClient(path: enclave.socketPath)
            client.sendRequest(id: UInt64(id), op: "hello", args: ["version": enclaveProtocolVersion])
            XCTAssertNotNil(try client.readReply())
            held.append(client)
        }
        let over = try RawClient(path: enclave.socketPath)
        guard let refusal = try over.readReply(), let body = refusal["reply"] as? [String: Any],
            let value = body["value"] as? [String: Any]
        else { return XCTFail("no answer to the sixth connection") }
        XCTAssertEqual(value["code"] as? String, FailureCode.busy.rawValue, "\(refusal)")
        XCTAssertTrue((value["message"] as? String ?? "").contains("5 connections"), "\(refusal)")
        XCTAssertTrue(over.isClosed(), "and closed")
        held.removeLast().close()
        eventually("a closed connection makes room") { (try? EnclaveConnection(socketPath: enclave.socketPath)) != nil }
        XCTAssertEqual(try enclave.status().enrolledCount, 1, "the daemon serves on")
        for connection in held { connection.close() }
    }

    func testAConnectionThatNeverSaysHelloIsClosed() throws {
        let enclave = try TestEnclave(.with { $0.extraArguments = ["--hello-timeout", "1"] })
        let silent = try RawClient(path: enclave.socketPath)
        let greeted = try RawClient(path: enclave.socketPath)
        greeted.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertNotNil(try greeted.readReply())
        let start = Date()
        XCTAssertTrue(silent.isClosed(timeout: 10), "a silent connection is closed")
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
        // One that said hello stays, past the deadline.
        Thread.sleep(forTimeInterval: 1.5)
        greeted.sendRequest(id: 2, op: "status")
        let status = try greeted.readReply()
        XCTAssertEqual(
            (status?["reply"] as? [String: Any])?["kind"] as? String,
            "status",
            "\(String(describing: status))"
        )
    }

    /// Attack: an unprivileged user opens 1,000 connections to the system daemon and keeps them.
    /// Before, the daemon ran out of descriptors and left everyone else unanswered.
    func testAnotherUsersFloodLeavesEveryoneElseServed() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") else {
            throw XCTSkip("needs root and runuser to act as a second user")
        }
        // The daemon starts with the descriptor limit most machines give a process (1,024), as the
        // attack found it; it may raise its own soft limit from there.
        let wrapper = NSTemporaryDirectory() + "laenclaved-nofile-\(getpid())"
        try "#!/bin/sh\nulimit -S -n 1024\nexec \"\(productPath("laenclaved"))\" \"$@\"\n".write(
            toFile: wrapper,
            atomically: true,
            encoding: .utf8
        )
        chmod(wrapper, 0o755)
        defer { unlink(wrapper) }
        let enclave = try TestEnclave(
            .with {
                $0.systemMode = true
                $0.daemonPath = wrapper
            }
        )
        let script = """
            import socket, sys, time
            held = []
            deadline = time.time() + 10
            while len(held) < 1000 and time.time() < deadline:
                try:
                    s = socket.socket(socket.AF_UNIX)
                except OSError:
                    break  # the flood's own descriptor limit
                s.setblocking(False)
                try:
                    s.connect(sys.argv[1])
                    held.append(s)
                except OSError:
                    s.close()
                    time.sleep(0.001)
            print(len(held), flush=True)
            time.sleep(float(sys.argv[2]))
            """
        let flood = Process()
        flood.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        flood.arguments = ["-u", "nobody", "--", "/usr/bin/python3", "-c", script, enclave.socketPath, "60"]
        let out = Pipe()
        let err = Pipe()
        flood.standardOutput = out
        flood.standardError = err
        try flood.run()
        defer {
            flood.terminate()
            flood.waitUntilExit()
        }
        // The flood prints how many connections it opened once it is done opening them.
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        let opened = Int(String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        XCTAssertGreaterThan(
            opened,
            0,
            "the flood connected: \(String(decoding: err.fileHandleForReading.availableData, as: UTF8.self))"
        )
        // While the flood holds its connections, root is served at once.
        let start = Date()
        let status = try runProcess(productPath("lactl"), ["status", "--socket", enclave.socketPath], timeout: 15)
        XCTAssertEqual(status.status, 0, status.stdout + status.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "root waited for the flood")
        eventually(
            "the daemon to refuse the flood's connections over its limit (\(opened) connected): \(enclave.log().suffix(1500))"
        ) {
            enclave.log().contains("refused a connection over the limit")
        }
        // And while the flood holds its connections, it holds at most its own budget of the
        // daemon's descriptors (two a connection), once the daemon has gone through the
        // connections waiting in its backlog: the flood's connects succeed as they are queued, and
        // each one over the limit holds a descriptor while it is accepted, answered and closed (a
        // snapshot under the full suite's load caught over a hundred of them).
        let budget = ConnectionBudget.descriptors(forConnections: 256)
        var descriptors = Int.max
        let deadline = Date().addingTimeInterval(10)
        repeat {
            descriptors =
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(enclave.processID)/fd").count) ?? .max
            if descriptors < budget { break }
            usleep(10_000)
        } while Date() < deadline
        XCTAssertLessThan(descriptors, budget, "the daemon holds \(descriptors) descriptors")
        XCTAssertTrue(flood.isRunning, "the flood still holds its connections")
    }
    /// Attack: a user with subordinate uids (/etc/subuid, what `newuidmap` lets their user
    /// namespaces run as) connects under several of them. Counted as that many users (before),
    /// they filled the daemon's whole budget and every other user was refused ("the daemon serves
    /// 8 connections already"). Counted against their owner, they hold the owner's share only.
    func testSubordinateUIDsTakeTheirOwnersShare() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
        else {
            throw XCTSkip("needs root, setpriv and python3 to run clients as subordinate uids")
        }
        let subuid = "/etc/subuid"
        let original = FileManager.default.contents(atPath: subuid)
        // Written in place (the file keeps its inode, owner, mode and label), and put back.
        func rewrite(_ contents: Data) {
            let file = open(subuid, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard file >= 0 else { return XCTFail("cannot write \(subuid)") }
            defer { close(file) }
            XCTAssertEqual(contents.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }, contents.count)
        }
        defer {
            if let original { rewrite(original) } else { unlink(subuid) }
        }
        // nobody (65534) owns 100000…165535 for the length of this test.
        var lines = original.map { String(decoding: $0, as: UTF8.self) } ?? ""
        if !lines.isEmpty && !lines.hasSuffix("\n") { lines += "\n" }
        rewrite(Data((lines + "nobody:100000:65536\n").utf8))
        let enclave = try TestEnclave(
            .with {
                $0.systemMode = true
                $0.extraArguments = ["--max-connections-per-user", "3", "--max-connections", "8"]
            }
        )
        _ = try enclave.status()
        // Each subordinate uid opens 3 connections and counts those the daemon has not refused
        // (closed) within 2 s; they stay open for a while.
        let script = """
            import select, socket, sys, time
            held = []
            for _ in range(3):
                s = socket.socket(socket.AF_UNIX)
                s.connect(sys.argv[1])
                held.append(s)
            time.sleep(2)
            kept = [s for s in held if not select.select([s], [], [], 0)[0]]
            print(len(kept), flush=True)
            time.sleep(20)
            """
        var clients: [(Process, Pipe)] = []
        defer {
            for (client, _) in clients {
                client.terminate()
                client.waitUntilExit()
            }
        }
        for uid in 100_000..<100_004 {
            let client = Process()
            client.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            client.arguments = [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", "/usr/bin/python3", "-c", script,
                enclave.socketPath,
            ]
            let out = Pipe()
            client.standardOutput = out
            try client.run()
            clients.append((client, out))
            usleep(300_000)
        }
        var kept = 0
        for (_, out) in clients {
            let line = String(decoding: out.fileHandleForReading.readData(ofLength: 2), as: UTF8.self)
            kept += Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        }
        XCTAssertEqual(kept, 3, "the four subordinate uids hold their owner's 3 connections, no more")
        XCTAssertTrue(enclave.log().contains("uid=100001"), "refused as their owner's: \(enclave.log().suffix(1500))")
        // Everyone else is served meanwhile: root, counted as itself.
        let status = try runProcess(productPath("lactl"), ["status", "--socket", enclave.socketPath], timeout: 15)
        XCTAssertEqual(status.status, 0, status.stdout + status.stderr)
    }

    /// Attack: a client asks for large answers and never reads them (before: 55 `matchAll` copies
    /// grew the daemon from 39 MB to 1,133 MB, ~1 GB still after the connection closed). Its
    /// answers are encoded as they are made and bounded in bytes (`ChannelReplySink`): past the
    /// bound the daemon closes the connection; everyone else is served meanwhile, and the daemon's
    /// peak memory grows by a few MB (without the bound: the connection stays open and the peak
    /// grows by ~50 MB for these 2,000 answers, checked by lifting the bound).
    func testAClientThatStopsReadingIsClosedAndHoldsBoundedMemory() throws {
        let enclave = try TestEnclave()
        let attributes: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("large"), "acct": .string("a"),
        ]
        var add = attributes
        add["v_Data"] = .data(Data(repeating: 0x5A, count: 40_000))
        guard
            case .keychain(let added) = try enclave.send(.keychainAdd(KeychainRequest(attributes: add, context: "big"))),
            added.status == .success
        else {
            return XCTFail("the large item was not added")
        }
        func peakKB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(enclave.processID)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        let before = peakKB()

        let reader = try RawClient(path: enclave.socketPath)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(reader.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        reader.sendFrame(RequestEnvelope(id: 1, request: .hello(.init(version: enclaveProtocolVersion))).encoded())
        let copy = RequestEnvelope(
            id: 2,
            request: .keychainCopy(KeychainRequest(attributes: attributes, context: "big", returnData: true))
        ).encoded()
        // Paced below the connection's 64 running requests, so that the answers are the large ones
        // (not `busy`): unbounded, 2,000 of them would be 80 MB waiting in the daemon.
        var sent = 0
        for i in 0..<2_000 {
            guard reader.sendFrame(copy) else { break }
            sent += 1
            if i % 32 == 31 { usleep(10_000) }
        }
        // Everyone else is answered while the unread answers pile up (or after they were cut off).
        let start = Date()
        XCTAssertTrue(try enclave.status().passcodeSet)
        try enclave.queue(.match)
        guard
            case .evaluated(let evaluation) = try enclave.send(
                .evaluate(
                    .init(
                        context: "served",
                        policy: PolicyValue.deviceOwnerAuthenticationWithBiometrics.rawValue,
                        options: .init(reason: "Still served")
                    )
                )
            )
        else { return XCTFail("no evaluation") }
        XCTAssertTrue(evaluation.success, "\(evaluation)")
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "another client waited for the one that does not read")
        // The daemon closed the connection: what it had sent, then the end.
        var frames = 0
        var ended = false
        while !ended {
            switch reader.readFrame(timeout: 15) {
            case .payload: frames += 1
            case .closed: ended = true
            case .timeout:
                XCTFail("the connection that never read was not closed (\(frames) answers read, \(sent) requests sent)")
                ended = true
            }
        }
        XCTAssertLessThan(frames, sent, "the daemon stopped answering it before its \(sent) requests")
        let growth = peakKB() - before
        print(
            "slow reader: \(sent) requests sent, \(frames) answers received before the close; daemon peak memory \(before / 1024) → \(peakKB() / 1024) MB"
        )
        XCTAssertLessThan(
            growth,
            16 * 1024,
            "the daemon's peak memory grew by \(growth / 1024) MB (unbounded, this attack took it up by ~50 MB)"
        )
    }
}
