import CPeerSocket
import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The handoff socket as an attacker would try it: a ticket shown by another process, a ticket
/// used twice, a descriptor that is not a terminal, no descriptor, garbage, and connections that
/// say nothing. Each gets its status byte and hands nothing over.
final class HandoffServerTests: XCTestCase {
    private var enclave: TestEnclave!

    /// XCTest keeps every test case object until the process ends: the daemon and its directory
    /// go with the test, not with the object.
    override func tearDown() {
        enclave = nil
    }

    override func setUpWithError() throws { enclave = try TestEnclave() }

    private var handoffPath: String { EnclavePaths.handoffSocket(for: enclave.socketPath) }

    /// A greeted connection (to the test's daemon unless `socketPath` is given) and its answer to
    /// `handoff` (a terminal's unless told).
    private func askHandoff(
        _ kind: HandedDescriptor = .terminal,
        at socketPath: String? = nil
    ) throws -> (RawClient, reply: [String: Any]?) {
        let client = try RawClient(path: socketPath ?? enclave.socketPath)
        client.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        _ = try client.readReply()
        client.sendRequest(id: 2, op: "handoff", args: ["kind": kind.rawValue])
        return (client, try client.readReply()?["reply"] as? [String: Any])
    }

    /// A greeted connection and a ticket issued on it (a terminal's unless told).
    private func ticket(_ kind: HandedDescriptor = .terminal, at socketPath: String? = nil) throws -> (RawClient, Data)
    {
        let (client, reply) = try askHandoff(kind, at: socketPath)
        guard reply?["kind"] as? String == "handoffTicket", let text = reply?["value"] as? String,
            let token = Data(base64Encoded: text)
        else {
            client.close()
            throw Failure(.internalError, "no ticket: \(String(describing: reply))")
        }
        return (client, token)
    }

    /// A fresh handoff connection (to the test's daemon unless `path` is given; reads time out
    /// after 5 s) and the daemon's first byte: `Handoff.ready`, or its answer at once (busy); nil
    /// when none came.
    private func openHandoff(at path: String? = nil) throws -> (socket: Int32, first: UInt8?) {
        let socket = try EnclaveConnection.connectSocket(path ?? handoffPath)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var first: UInt8 = 255
        return (socket, recv(socket, &first, 1, 0) == 1 ? first : nil)
    }

    /// Sends `bytes` (with `descriptor` attached when given) on a fresh handoff connection, once
    /// the daemon is ready; its status byte.
    private func handOver(_ bytes: [UInt8], descriptor: Int32?, at path: String? = nil) throws -> HandoffStatus? {
        let (socket, first) = try openHandoff(at: path)
        defer { close(socket) }
        guard let first else { return nil }
        guard first == Handoff.ready else { return HandoffStatus(rawValue: first) }
        let sent =
            descriptor.map { la_send_with_descriptor(socket, bytes, bytes.count, $0) }
            ?? send(socket, bytes, bytes.count, Int32(MSG_NOSIGNAL))
        XCTAssertEqual(sent, bytes.count, "send: \(String(cString: strerror(errno)))")
        var answer: UInt8 = 255
        guard recv(socket, &answer, 1, 0) == 1 else { return nil }
        return HandoffStatus(rawValue: answer)
    }

    func testADescriptorThatIsNotATerminalIsRefused() throws {
        let (client, token) = try ticket()
        defer { client.close() }
        var pipeEnds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&pipeEnds), 0)
        defer {
            close(pipeEnds[0])
            close(pipeEnds[1])
        }
        XCTAssertEqual(try handOver([UInt8](token), descriptor: pipeEnds[0]), .notATerminal)
        // The ticket is spent: the same bytes again find nothing.
        XCTAssertEqual(try handOver([UInt8](token), descriptor: pipeEnds[0]), .unknownTicket)
    }

    /// A terminal the app opened itself (a fresh pseudo-terminal it could type into) is not the
    /// terminal it runs in: refused. (Before this check it was taken as the prompt's terminal.)
    func testATerminalThatIsNotTheProcesssOwnIsRefused() throws {
        let (client, token) = try ticket()
        defer { client.close() }
        let pty = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard pty >= 0 else { throw XCTSkip("no /dev/ptmx") }
        defer { close(pty) }
        XCTAssertEqual(isatty(pty), 1)
        XCTAssertEqual(try handOver([UInt8](token), descriptor: pty), .notTheControllingTerminal)
    }

    /// A ticket learned by another process (another app of the same user) is worth nothing to it:
    /// the kernel names the process on the handoff socket, and it is not the one that asked.
    func testATicketShownByAnotherProcessIsRefusedAndSpent() throws {
        let (client, token) = try ticket()
        defer { client.close() }
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            s.connect(sys.argv[1])
            assert s.recv(1)[0] == \(Handoff.ready)
            socket.send_fds(s, [bytes.fromhex(sys.argv[2])], [0])
            print(s.recv(1)[0])
            """
        let other = try runProcess(
            "/usr/bin/python3",
            ["-c", script, handoffPath, token.map { String(format: "%02x", $0) }.joined()]
        )
        XCTAssertEqual(
            other.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            "\(HandoffStatus.wrongProcess.rawValue)",
            other.stderr
        )
        var pipeEnds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&pipeEnds), 0)
        defer {
            close(pipeEnds[0])
            close(pipeEnds[1])
        }
        XCTAssertEqual(
            try handOver([UInt8](token), descriptor: pipeEnds[0]),
            .unknownTicket,
            "no second try for the owner either"
        )
    }

    func testNoDescriptorGarbageAndUnknownTicketsAreRefused() throws {
        let (client, token) = try ticket()
        defer { client.close() }
        XCTAssertEqual(try handOver([UInt8](token), descriptor: nil), .noDescriptor)
        XCTAssertEqual(try handOver([1, 2, 3], descriptor: nil), .malformed)
        XCTAssertEqual(try handOver([UInt8](repeating: 7, count: Handoff.ticketBytes), descriptor: 0), .unknownTicket)
        // A ticket dies with its connection.
        let (closing, second) = try ticket()
        closing.close()
        usleep(200_000)
        XCTAssertEqual(try handOver([UInt8](second), descriptor: 0), .unknownTicket)
    }

    /// A refused descriptor is closed, and a file on FUSE waits in its close for its server's
    /// FLUSH, which an attacker's server never answers. Closed on the handoff socket's one thread
    /// (before), that close held every user's handoffs for good: the next exchange got no answer.
    /// Now the close waits in its user's turn, and the socket answers on.
    func testARefusedFileWhoseCloseNeverEndsHoldsNoOtherHandoff() throws {
        let fileSystem = try NeverFlushingFileSystem()
        let file = try fileSystem.openFile()
        defer {
            fileSystem.end()  // the daemon's closes, and this one, go on
            close(file)
        }
        let unknown = [UInt8](repeating: 7, count: Handoff.ticketBytes)
        XCTAssertEqual(try handOver(unknown, descriptor: file), .unknownTicket)
        let (client, token) = try ticket()
        defer { client.close() }
        XCTAssertEqual(try handOver([UInt8](token), descriptor: file), .notATerminal, "judged without asking FUSE")
        let (other, second) = try ticket()
        defer { other.close() }
        XCTAssertEqual(try handOver([UInt8](second), descriptor: nil), .noDescriptor, "the socket answers on")
        // The closes wait in this user's turn: with 8 under way (`HandedDescriptorCloser.heldPerUser`)
        // the user hands no more — answered busy, nothing received — until they end.
        for _ in 2..<8 { XCTAssertEqual(try handOver(unknown, descriptor: file), .unknownTicket) }
        XCTAssertEqual(try handOver(unknown, descriptor: file), .busy)
        fileSystem.end()
        var answer = HandoffStatus.busy
        for _ in 0..<50 where answer == .busy {
            usleep(100_000)
            answer = try handOver(unknown, descriptor: nil) ?? .busy
        }
        XCTAssertEqual(answer, .noDescriptor, "taken again once the closes end")
    }

    /// A file handed as secret input was kept until its connection ended, then closed on the
    /// connection's event loop: a file on FUSE whose server never answers FLUSH held that loop,
    /// and every connection it serves, every user's, for good (before: handed, then after the
    /// connection closed new connections went unanswered). Secret input is a pipe now (the client
    /// library passes a file's lines through one): such a file is refused, and its close waits in
    /// its user's turn.
    func testAFileOnFUSEIsNoSecretInputAndItsCloseHoldsNoConnection() throws {
        let fileSystem = try NeverFlushingFileSystem()
        let file = try fileSystem.openFile()
        defer {
            fileSystem.end()
            close(file)
        }
        let (client, token) = try ticket(.secretInput)
        XCTAssertEqual(try handOver([UInt8](token), descriptor: file), .notAPipe)
        client.close()
        usleep(200_000)
        // More connections than the daemon has event loops (one per core): each is greeted.
        for number in 0..<(2 * ProcessInfo.processInfo.activeProcessorCount + 2) {
            let other = try RawClient(path: enclave.socketPath)
            defer { other.close() }
            other.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
            XCTAssertNotNil(try other.readReply(timeout: 5), "connection \(number) greeted")
        }
    }

    /// A close that never ends cannot be ended by any signal, not even SIGKILL, and keeps the
    /// descriptor table of the thread stuck in it. In the daemon's own table (before), that kept
    /// the state directory's lock after the daemon was killed: no daemon could start again on that
    /// state until the attacker let go (every start: "another laenclaved already serves"). The
    /// handoff loop has a table of its own now, and a new daemon starts.
    func testAStuckCloseKeepsNoDaemonFromStartingAgain() throws {
        let fileSystem = try NeverFlushingFileSystem()
        defer { fileSystem.end() }
        let file = try fileSystem.openFile()
        let unknown = [UInt8](repeating: 7, count: Handoff.ticketBytes)
        XCTAssertEqual(try handOver(unknown, descriptor: file), .unknownTicket)
        // The opener's own close is answered: nothing of this process holds the file when it starts
        // a daemon (whose exec would close a copy, and wait).
        close(file)
        let old = enclave.processID
        guard old > 0 else { return XCTFail("no daemon") }
        XCTAssertTrue(
            Self.hasThread(of: old, named: "la-close-fd", waitingIn: "fuse_flush"),
            "the refused file's close waits for its FUSE server"
        )
        kill(old, SIGKILL)
        defer {
            fileSystem.end()  // the stuck close ends, and the old daemon with it
            var status: Int32 = 0
            while waitpid(old, &status, 0) < 0 && errno == EINTR {}
        }
        // Its descriptors go with its last thread of their table: its socket no longer accepts.
        guard Self.refusesConnections(enclave.socketPath) else {
            return XCTFail("the killed daemon's descriptor table lives on: its socket still accepts")
        }
        var failure: (any Error)?
        for _ in 0..<25 {
            do {
                try enclave.start()
                failure = nil
                break
            } catch {
                failure = error
                usleep(200_000)
            }
        }
        XCTAssertNil(failure, "a new daemon serves the same state")
        XCTAssertNoThrow(try enclave.status())
    }

    /// The kernel releases what rides in a message nobody received when its connection closes,
    /// on the thread that closes it. Here that is the last open file of a file on FUSE whose
    /// server caches writes and never takes a page back: its release writes the dirty pages back
    /// and waits, without end. Sent behind the ticket (the daemon reads one message), it held the
    /// handoff loop, so every user's handoffs, for good (before: the next handoff got no answer).
    /// Now nothing can enter a connection after its one message (`la_end_reading`), and one that
    /// still holds unread bytes is closed in its user's turn.
    func testADescriptorLeftUnreadHoldsNoOtherHandoff() throws {
        try assertADescriptorLeftUnreadHoldsNoOtherHandoff(urgent: false)
    }

    /// The same descriptor riding with urgent data (MSG_OOB), alone at the head of the queue. How
    /// a plain read treats an urgent byte depends on the kernel: it may free it where it is read,
    /// releasing what rode with it in the reader, or leave it where FIONREAD does not count it, so
    /// that the connection looks empty and is closed on the loop. Urgent data is read in line now
    /// (SO_OOBINLINE): the descriptor is received, refused, and its close (which writes back first:
    /// `fuse_flush`) waits in the user's turn. On this kernel a read that left the byte aside was
    /// still caught by the look at what is left (`fuse_release`, in the user's turn), which is what
    /// a build without the setting showed.
    func testADescriptorRidingWithUrgentDataHoldsNoOtherHandoff() throws {
        try assertADescriptorLeftUnreadHoldsNoOtherHandoff(urgent: true)
    }

    private func assertADescriptorLeftUnreadHoldsNoOtherHandoff(urgent: Bool) throws {
        let fileSystem = try NeverFlushingFileSystem(writeBack: true)
        let sent = try fileSystem.openFile()
        let writer = try fileSystem.openFile(writing: true)
        defer {
            fileSystem.end()  // every release waiting on it goes on, and then this close
            close(writer)
        }
        let (socket, first) = try openHandoff()
        defer { close(socket) }
        XCTAssertEqual(first, Handoff.ready)
        // The daemon held still while both messages go, this process closes its copy of the sent
        // file (nothing is dirty yet: its close is answered) and dirties a page through the other:
        // the daemon's release of the unread message is the sent file's last, with a page to write.
        let daemon = enclave.processID
        kill(daemon, SIGSTOP)
        var stopped = true
        defer { if stopped { kill(daemon, SIGCONT) } }
        let unknown = [UInt8](repeating: 7, count: Handoff.ticketBytes)
        if urgent {
            // Alone, at the head of the queue, where the daemon's one read meets it.
            XCTAssertEqual(la_send_with_descriptor_flags(socket, [1], 1, sent, Int32(MSG_OOB)), 1)
        } else {
            let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
            XCTAssertEqual(la_send_with_descriptor(socket, unknown, unknown.count, null), unknown.count)
            close(null)
            XCTAssertEqual(la_send_with_descriptor(socket, [1], 1, sent), 1)
        }
        close(sent)
        XCTAssertEqual(write(writer, "dirty", 5), 5)
        kill(daemon, SIGCONT)
        stopped = false
        var answer: UInt8 = 255
        XCTAssertEqual(recv(socket, &answer, 1, 0), 1)
        XCTAssertEqual(HandoffStatus(rawValue: answer), urgent ? .malformed : .unknownTicket)
        // Received and refused (its close writes back first), or released with the connection.
        XCTAssertTrue(
            Self.hasThread(of: daemon, named: "la-close-fd", waitingIn: urgent ? "fuse_flush" : "fuse_release"),
            "the file's last close waits for the FUSE server, in the user's turn"
        )
        XCTAssertEqual(try handOver(unknown, descriptor: nil), .noDescriptor, "the socket answers on")
    }

    /// A descriptor sent before the daemon says `ready` never enters the connection: the kernel
    /// refuses the send (SO_PASSRIGHTS, set on the listener, holds for what comes before the
    /// accept too). So a connection the daemon answers busy, or never reads, holds nothing whose
    /// release could wait (the test above), and the loop may close it itself.
    func testADescriptorSentBeforeTheDaemonIsReadyNeverEntersTheConnection() throws {
        guard la_kernel_refuses_unasked_descriptors() == 1 else {
            throw XCTSkip("this kernel cannot refuse descriptors (SO_PASSRIGHTS: Linux 6.16)")
        }
        // The daemon held still: the connection waits in the listener's queue, not yet accepted.
        let daemon = enclave.processID
        kill(daemon, SIGSTOP)
        var stopped = true
        defer { if stopped { kill(daemon, SIGCONT) } }
        let socket = try EnclaveConnection.connectSocket(handoffPath)
        let unknown = [UInt8](repeating: 7, count: Handoff.ticketBytes)
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(null) }
        let sent = la_send_with_descriptor(socket, unknown, unknown.count, null)
        let failure = errno
        // Gone before the next handoff (one of a user's at a time is told ready).
        close(socket)
        kill(daemon, SIGCONT)
        stopped = false
        XCTAssertEqual(sent, -1, "a descriptor entered a connection before the daemon was ready")
        XCTAssertEqual(failure, EPERM)
        XCTAssertEqual(try handOver(unknown, descriptor: nil), .noDescriptor, "the socket answers on")
    }

    /// One handoff of a user's at a time may send descriptors: a second connection hears `ready`
    /// only once the first's message is read, so what one user has under way stays within one
    /// message beyond their cap of closes.
    func testOneHandoffOfAUserAtATimeIsToldReady() throws {
        let (first, told) = try openHandoff()
        defer { close(first) }
        XCTAssertEqual(told, Handoff.ready)
        let second = try EnclaveConnection.connectSocket(handoffPath)
        defer { close(second) }
        var byte: UInt8 = 255
        var quick = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &quick, socklen_t(MemoryLayout<timeval>.size))
        XCTAssertEqual(recv(second, &byte, 1, 0), -1, "told ready while another of the user's is")
        let unknown = [UInt8](repeating: 7, count: Handoff.ticketBytes)
        XCTAssertEqual(send(first, unknown, unknown.count, Int32(MSG_NOSIGNAL)), unknown.count)
        XCTAssertEqual(recv(first, &byte, 1, 0), 1)
        XCTAssertEqual(HandoffStatus(rawValue: byte), .noDescriptor)
        var wait = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        XCTAssertEqual(recv(second, &byte, 1, 0), 1)
        XCTAssertEqual(byte, Handoff.ready, "its turn came")
    }

    /// What the loop looks at before it closes a connection it never told ready itself
    /// (`la_end_reading`): descriptors behind ordinary bytes and urgent data are found, though a
    /// peek stops at urgent data's mark; bytes alone are not taken for descriptors.
    func testALookAtWhatIsLeftFindsDescriptorsBehindUrgentData() throws {
        for (urgent, descriptor) in [(true, true), (false, true), (true, false), (false, false)] {
            var pair: [Int32] = [-1, -1]
            XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
            defer {
                close(pair[0])
                close(pair[1])
            }
            XCTAssertEqual(la_read_urgent_in_line(pair[1]), 0)
            XCTAssertEqual(send(pair[0], "x", 1, Int32(MSG_NOSIGNAL)), 1)
            let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(null) }
            let flags = urgent ? Int32(MSG_OOB) : 0
            let sent =
                descriptor
                ? la_send_with_descriptor_flags(pair[0], "y", 1, null, flags)
                : send(pair[0], "y", 1, Int32(MSG_NOSIGNAL) | flags)
            XCTAssertEqual(sent, 1)
            XCTAssertEqual(la_end_reading(pair[1], 1), descriptor ? 1 : 2, "urgent \(urgent), descriptor \(descriptor)")
        }
    }

    /// Whether, within 10 s, connecting to `path` is refused (no one listens). Non-blocking: a
    /// listener nobody accepts from fills its backlog, and a blocking connect would wait there.
    private static func refusesConnections(_ path: String) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
        }
        for _ in 0..<500 {
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            let refused = connected != 0 && (errno == ECONNREFUSED || errno == ENOENT)
            close(socket)
            if refused { return true }
            usleep(20_000)
        }
        return false
    }

    /// Whether, within 5 s, a thread of `pid` named `name` waits in `function`
    /// (/proc/PID/task/TID/comm, and its stack, which root reads, or its wchan).
    private static func hasThread(of pid: pid_t, named name: String, waitingIn function: String) -> Bool {
        for _ in 0..<250 {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            for task in tasks {
                let comm = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)
                let stack = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stack", encoding: .utf8)
                let wchan = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/wchan", encoding: .utf8)
                // The stack names the call (root reads it); the wait channel only where it waits.
                let waiting =
                    stack?.contains(function) == true
                    || ["request_wait_answer", "__fuse_simple_request"].contains(wchan ?? "")
                if comm?.trimmingCharacters(in: .newlines) == name, waiting { return true }
            }
            usleep(20_000)
        }
        return false
    }

    /// Connections that say nothing hold at most `perUserWaiting` slots of their own user, each for
    /// `Handoff.exchangeTimeout`; the next is answered busy at once, and the loop keeps serving.
    func testSilentConnectionsAreBoundedAndTimedOut() throws {
        let silent = try (0..<4).map { _ in try EnclaveConnection.connectSocket(handoffPath) }
        defer { for fd in silent { close(fd) } }
        usleep(200_000)
        XCTAssertEqual(try handOver([1], descriptor: nil), .busy)
        // The first is told ready and, silent, not a ticket; the others, waiting their turn behind
        // it (one of a user's at a time may send descriptors), busy — or, told ready as the first
        // went, silent too.
        for (number, socket) in silent.enumerated() {
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var answer: [UInt8] = [255, 255, 255]
            let n = recv(socket, &answer, 3, Int32(MSG_WAITALL))
            let said = Array(answer.prefix(max(0, n)))
            if number == 0 {
                XCTAssertEqual(
                    said,
                    [Handoff.ready, HandoffStatus.malformed.rawValue],
                    "the first, within the timeout"
                )
            } else {
                XCTAssertTrue(
                    said == [HandoffStatus.busy.rawValue] || said == [Handoff.ready, HandoffStatus.malformed.rawValue],
                    "connection \(number) answered within the timeout: \(said)"
                )
            }
        }
        let (client, token) = try ticket()
        defer { client.close() }
        XCTAssertEqual(try handOver([UInt8](token), descriptor: nil), .noDescriptor, "served again")
    }
}

extension HandoffServerTests {
    /// A daemon of its own started with `--handoff setting` (no passcode: administration needs a
    /// handed pipe).
    private func daemon(handoff setting: String, systemMode: Bool = false) throws -> TestEnclave {
        var configuration = TestEnclave.Configuration()
        configuration.passcode = nil
        configuration.systemMode = systemMode
        configuration.extraArguments = ["--handoff", setting]
        return try TestEnclave(configuration)
    }

    /// `--handoff never`: no handoff socket; a ticket is refused at once, saying why (a client
    /// would otherwise try a socket nobody serves), and a secret pipe cannot be handed, with that
    /// reason. The daemon serves on.
    func testADaemonToldNeverServesNoHandoffSocketAndSaysWhy() throws {
        let closed = try daemon(handoff: "never")
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: EnclavePaths.handoffSocket(for: closed.socketPath)),
            "a handoff socket was bound"
        )
        let (client, reply) = try askHandoff(at: closed.socketPath)
        defer { client.close() }
        XCTAssertEqual(reply?["kind"] as? String, "failure", "\(String(describing: reply))")
        let failure = reply?["value"] as? [String: Any]
        XCTAssertEqual(failure?["code"] as? String, "notPermitted")
        XCTAssertEqual(failure?["message"] as? String, "this daemon takes no handoffs: handoff = never")

        let connection = try EnclaveConnection(socketPath: closed.socketPath)
        defer { connection.close() }
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&ends), 0)
        defer { for fd in ends { close(fd) } }
        XCTAssertThrowsError(try connection.handOverSecretInput(ends[0])) { error in
            XCTAssertEqual("\(error)", "this daemon takes no handoffs: handoff = never")
        }
        guard case .hello = try connection.request(.hello(.init(version: enclaveProtocolVersion))) else {
            return XCTFail("the daemon does not serve on")
        }
        let doctor = try runProcess(productPath("lactl"), ["doctor", "--socket", closed.socketPath])
        XCTAssertTrue(
            doctor.stdout.contains("handoff:      this daemon takes no handoffs: handoff = never"),
            doctor.stdout
        )
        // In a terminal: lactl says why the terminal was not taken, and the daemon why nobody is asked.
        let set = try TerminalCommand.lactl("passcode set", on: closed)
        defer { set.terminal.stop() }
        XCTAssertNotEqual(set.exitStatus(), 0)
        XCTAssertTrue(
            set.errors.contains(
                "this terminal was not handed to the daemon: this daemon takes no handoffs: handoff = never"
            ),
            set.errors
        )
        XCTAssertTrue(set.errors.contains("nobody can be asked here"), set.errors)
    }

    /// `--handoff if-kernel-refuses`, a system daemon: everyone's where the kernel refuses
    /// descriptors sent before they are asked for (SO_PASSRIGHTS, Linux 6.16), root's only
    /// elsewhere (the socket 0600) — asked of this machine's kernel.
    func testADaemonToldIfKernelRefusesServesAsTheKernelAllows() throws {
        guard getuid() == 0 else { throw XCTSkip("a system daemon's socket modes: needs root") }
        let refuses = la_kernel_refuses_unasked_descriptors() == 1
        let daemon = try daemon(handoff: "if-kernel-refuses", systemMode: true)
        var info = stat()
        XCTAssertEqual(stat(EnclavePaths.handoffSocket(for: daemon.socketPath), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, refuses ? 0o666 : 0o600, "kernel refuses unasked descriptors: \(refuses)")
        let log = try String(contentsOfFile: daemon.logPath, encoding: .utf8)
        XCTAssertEqual(log.contains("the handoff socket takes root's handoffs only"), !refuses, log)
        let doctor = try runProcess(productPath("lactl"), ["doctor", "--socket", daemon.socketPath])
        XCTAssertTrue(
            doctor.stdout.contains(refuses ? "handoff:      served: prompts" : "handoff:      served to root only"),
            doctor.stdout
        )
    }
}

extension HandoffServerTests {
    /// A directory of a test's own, with the daemon's socket and the handoff socket beside it
    /// listening as systemd makes them, for a daemon started on them.
    private struct ActivatedSockets {
        let root: String
        let path: String
        /// The handoff socket beside `path`.
        var handoff: String { EnclavePaths.handoffSocket(for: path) }
        let listeners: [Int32]
        let log: String

        init(_ name: String, mode: mode_t = 0o600) throws {
            var template = Array("/tmp/la-\(name)-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw Failure(.internalError, "no temporary directory") }
            root = String(cString: made)
            mkdir(root + "/run", 0o700)
            path = root + "/run/socket"
            var listeners: [Int32] = []
            do {
                for socket in [path, EnclavePaths.handoffSocket(for: path)] {
                    listeners.append(try SocketActivationSupport.listeningSocket(at: socket, mode: mode))
                }
            } catch {
                for fd in listeners { close(fd) }
                try? FileManager.default.removeItem(atPath: root)
                throw error
            }
            self.listeners = listeners
            log = root + "/laenclaved.log"
            XCTAssertTrue(FileManager.default.createFile(atPath: log, contents: nil))
        }

        /// The daemon's command line on these sockets (`mode`: `--user` or `--system`), with `options`.
        func daemon(_ options: [String], mode: String = "--user") -> [String] {
            [
                productPath("laenclaved"), mode, "--socket", path, "--state-dir", root + "/state",
                "--key-file", root + "/keys/master.key", "--passcode-cost", "10", "--tpm", "off",
            ] + options
        }

        func remove() {
            for fd in listeners { close(fd) }
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    /// systemd's first activation: the connection that starts the daemon, and any made with it,
    /// exist before the daemon tells the handoff listener to refuse descriptors, so they may hold
    /// some sent unasked, whatever the kernel. One answered busy (the user's fifth) holds the last
    /// open file of a file on FUSE whose release waits without end: taken for empty (as the
    /// listener's setting would have it) and closed on the loop, it held every user's handoffs.
    /// Its own setting is read instead, it is looked at, and closed in its user's turn. (Before
    /// Linux 6.16 every connection is taken to hold what it may, and this is what the older kernel
    /// tests; the attack is on the listener's setting, 6.16's.)
    func testAConnectionMadeBeforeTheDaemonStartedIsClosedInItsUsersTurn() throws {
        let sockets = try ActivatedSockets("first-activation")
        defer { sockets.remove() }
        let (path, listeners, log) = (sockets.path, sockets.listeners, sockets.log)
        // Started first, holding still (a shell that stops itself before it execs the daemon): a
        // process started while this one holds a file of the FUSE mount waits in its close.
        let daemon = try SocketActivationSupport.spawn(
            [
                "/bin/sh", "-c", "kill -STOP $$; exec \"$@\"", "sh",
            ] + sockets.daemon([]),
            descriptors: listeners,
            log: log
        )
        defer {
            kill(daemon, SIGCONT)
            terminateAndWait(daemon)
        }
        eventually("the launcher to hold still") {
            let stat = (try? String(contentsOfFile: "/proc/\(daemon)/stat", encoding: .utf8)) ?? ""
            return stat.split(separator: ")").last?.split(separator: " ").first == "T"
        }
        let fileSystem = try NeverFlushingFileSystem(writeBack: true)
        let sent = try fileSystem.openFile()
        let writer = try fileSystem.openFile(writing: true)
        defer {
            // The stuck release ends first: no signal ends a thread waiting in it.
            fileSystem.end()
            close(writer)
        }
        // Before the daemon runs: four that say a few bytes, and a fifth with the file alone. This
        // process closes its copy (clean: answered) and dirties a page through the other: the
        // daemon's release of the unread message is the file's last, with a page to write.
        let early = try (0..<5).map { _ in try EnclaveConnection.connectSocket(sockets.handoff) }
        defer { for fd in early { close(fd) } }
        for fd in early.prefix(4) { XCTAssertEqual(send(fd, [1, 2, 3], 3, Int32(MSG_NOSIGNAL)), 3) }
        XCTAssertEqual(la_send_with_descriptor(early[4], [1], 1, sent), 1, String(cString: strerror(errno)))
        close(sent)
        XCTAssertEqual(write(writer, "dirty", 5), 5)
        kill(daemon, SIGCONT)
        // The daemon's whole start comes first.
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(early[4], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer: UInt8 = 255
        XCTAssertEqual(recv(early[4], &answer, 1, 0), 1, "the fifth is answered")
        XCTAssertEqual(HandoffStatus(rawValue: answer), .busy, "over the user's four waiting")
        XCTAssertTrue(
            Self.hasThread(of: daemon, named: "la-close-fd", waitingIn: "fuse_release"),
            "the file's release waits for the FUSE server, in the user's turn"
        )
        // Another handoff is served.
        let (client, token) = try ticket(at: path)
        defer { client.close() }
        XCTAssertEqual(try handOver([UInt8](token), descriptor: nil, at: sockets.handoff), .noDescriptor)
    }
}

extension HandoffServerTests {
    /// A handoff socket systemd passes, under `handoff = never`: the daemon lets go of its copy
    /// (systemd's stays, and its file), refuses tickets saying why, and administration with no
    /// terminal handed says that the daemon cannot ask on one.
    func testAPassedHandoffSocketIsLetGoOfUnderNever() throws {
        let sockets = try ActivatedSockets("passed-handoff")
        defer { sockets.remove() }
        let (path, listeners, log) = (sockets.path, sockets.listeners, sockets.log)
        let handoff = sockets.handoff
        var handoffSocket = stat()
        XCTAssertEqual(fstat(listeners[1], &handoffSocket), 0)
        let daemon = try SocketActivationSupport.spawn(
            sockets.daemon(["--handoff", "never"]),
            descriptors: listeners,
            log: log
        )
        defer { terminateAndWait(daemon) }
        // Said once its own socket listens and the handoff socket was let go of.
        eventually("the daemon to let the handoff socket go", timeout: 20) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("no handoff socket")
        }
        let held = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon)/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon)/fd/\($0)")
        }
        XCTAssertFalse(held.isEmpty, "the daemon's descriptors")
        XCTAssertFalse(
            held.contains("socket:[\(handoffSocket.st_ino)]"),
            "the daemon holds the handoff socket: \(held)"
        )
        XCTAssertTrue(FileManager.default.fileExists(atPath: handoff), "systemd's file is left alone")

        let (client, reply) = try askHandoff(.secretInput, at: path)
        defer { client.close() }
        let failure = reply?["value"] as? [String: Any]
        XCTAssertEqual(failure?["message"] as? String, "this daemon takes no handoffs: handoff = never")

        let set = try runProcess(productPath("lactl"), ["passcode", "set", "--socket", path])
        XCTAssertNotEqual(set.status, 0)
        XCTAssertTrue(set.stderr.contains("nobody can be asked here"), set.stderr)
        XCTAssertTrue(set.stderr.contains("this daemon takes no handoffs: handoff = never"), set.stderr)
        let doctor = try runProcess(productPath("lactl"), ["doctor", "--socket", path])
        XCTAssertTrue(doctor.stdout.contains("\(handoff) is still there"), doctor.stdout)
    }
}

extension HandoffServerTests {
    /// `--handoff root`: only root's processes hand over (sudo's and polkit's prompts run as root).
    /// The socket systemd made for everyone (0666) is made root's (0600), so another user cannot
    /// even connect — nor queue a descriptor unasked — while root's handoff is served.
    func testADaemonToldRootTakesRootsHandoffsOnly() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw XCTSkip("another user's connection: needs root and /usr/bin/python3")
        }
        let sockets = try ActivatedSockets("root-handoff", mode: 0o666)
        defer { sockets.remove() }
        // Everyone may reach the directory, as /run/laenclaved.
        for directory in [sockets.root, sockets.root + "/run"] { chmod(directory, 0o755) }
        let handoff = sockets.handoff
        // Another user who connected while systemd held the socket alone, and sent a descriptor
        // unasked, is answered at once (and the connection closed in that user's turn).
        let sent = "/tmp/la-root-handoff-sent-\(UUID().uuidString)"
        defer { unlink(sent) }
        let early = Background {
            try runProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                    "import os, socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                        + "r, w = os.pipe(); socket.send_fds(s, [b'x'], [r]); open(sys.argv[2], 'w').close(); "
                        + "s.settimeout(30); print(s.recv(1)[0])",
                    handoff, sent,
                ]
            )
        }
        eventually("the other user's connection to wait, its descriptor sent", timeout: 30) {
            FileManager.default.fileExists(atPath: sent)
        }
        let daemon = try SocketActivationSupport.spawn(
            sockets.daemon(["--handoff", "root"], mode: "--system"),
            descriptors: sockets.listeners,
            log: sockets.log
        )
        defer { terminateAndWait(daemon) }
        eventually("the daemon to make the handoff socket root's", timeout: 20) {
            ((try? String(contentsOfFile: sockets.log, encoding: .utf8)) ?? "").contains("root's handoffs only")
        }
        let answered = try early.wait()
        XCTAssertEqual(
            answered.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            "\(HandoffStatus.rootOnly.rawValue)",
            answered.stderr
        )
        var info = stat()
        XCTAssertEqual(stat(handoff, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "the handoff socket's mode")
        // Another user reaches the daemon's socket, and not the handoff socket.
        func connectAsNobody(_ path: String) throws -> ProcessOutput {
            try runProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                    "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", path,
                ]
            )
        }
        XCTAssertEqual(try connectAsNobody(sockets.path).status, 0, "the daemon's socket is everyone's")
        let refused = try connectAsNobody(handoff)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("Permission denied"), refused.stderr)
        // Root's handoff is served.
        let (client, token) = try ticket(at: sockets.path)
        defer { client.close() }
        XCTAssertEqual(try handOver([UInt8](token), descriptor: nil, at: handoff), .noDescriptor)
    }
}
