import CPeerSocket
import EnclaveCore
import Foundation
import Synchronization
import XCTest

@testable import EnclaveServer

/// The privileged helper's interface, against the real helper process (`laenclaved --peer-helper`):
/// it pins a peer and proves the peer holds its connection, answers whether the peer still runs the
/// same program, forgets it, refuses a malformed request; a late answer is never taken for the
/// next request's; a helper that is gone stops the daemon.
final class PeerHelperTests: XCTestCase {
    private var helper: pid_t = 0
    /// Made on first use: its thread reads every answer on the socket, so a test that speaks to
    /// the helper through the raw socket uses no client before it is done.
    private var made: PeerHelperClient?
    private var client: PeerHelperClient {
        if let made { return made }
        let gone = self.gone
        made = PeerHelperClient(socket: daemonEnd, onGone: { gone.set() })
        return made!
    }
    private var daemonEnd: Int32 = -1
    private let gone = GoneFlag()

    final class GoneFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    override func setUpWithError() throws {
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let laenclaved = (me as NSString).deletingLastPathComponent + "/laenclaved"
        guard FileManager.default.isExecutableFile(atPath: laenclaved) else {
            throw XCTSkip("laenclaved is not built beside the tests")
        }
        var pair: [Int32] = [-1, -1]
        XCTAssertEqual(la_socketpair_seqpacket(&pair), 0)
        _ = fcntl(pair[1], F_SETFD, 0)
        let arguments: [String] = [laenclaved, "--peer-helper", String(pair[1])]
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        XCTAssertEqual(posix_spawn(&helper, laenclaved, nil, nil, &argv, environ), 0)
        close(pair[1])
        daemonEnd = pair[0]
    }

    override func tearDown() {
        made = nil
        if daemonEnd >= 0 { close(daemonEnd) }
        var status: Int32 = 0
        if helper > 0 {
            kill(helper, SIGKILL)
            waitpid(helper, &status, 0)
        }
    }

    /// A connected pair: the cookie of the daemon's end, and the client end (held by this process).
    private func connection() -> (cookie: UInt64, ends: [Int32]) {
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends), 0)
        var cookie: UInt64 = 0
        var size = socklen_t(MemoryLayout<UInt64>.size)
        XCTAssertEqual(getsockopt(ends[0], SOL_SOCKET, la_so_cookie, &cookie, &size), 0)
        return (cookie, ends)
    }

    func testItPinsAPeerThatHoldsItsConnectionAndForgetsIt() throws {
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        // With the peer's pidfd, as the kernel gives it from Linux 6.5, and without.
        let pidfd = la_pidfd_open(getpid())
        XCTAssertGreaterThanOrEqual(pidfd, 0)
        defer { close(pidfd) }
        for descriptor in [pidfd, nil] {
            var peer: HelperPinnedPeer? = try client.pin(pid: getpid(), pidfd: descriptor, cookie: cookie)
            let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
            XCTAssertEqual(peer?.identity.name, me, "the executable the kernel names, verified")
            XCTAssertEqual(peer?.identity.kind, .app)
            XCTAssertEqual(
                peer?.session,
                LoginSession.name(cgroup: (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? "")
            )
            XCTAssertEqual(peer?.executableChanged(), false)
            let handle = try XCTUnwrap(peer?.handle)
            peer = nil
            XCTAssertTrue(client.executableChanged(handle), "a released peer is forgotten")
        }
        XCTAssertFalse(gone.isSet)
    }

    /// An answer that comes after its request gave up (the helper was stopped) is never taken for
    /// the next request's: before, the next pin read it and got that earlier peer's answer.
    func testALateAnswerIsNotTakenForTheNextRequests() throws {
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        let (unheldCookie, unheld) = connection()
        close(unheld[1])
        defer { close(unheld[0]) }
        kill(helper, SIGSTOP)
        XCTAssertThrowsError(try client.pin(pid: getpid(), pidfd: nil, cookie: unheldCookie)) { error in
            XCTAssertEqual(error as? PeerProcess.Refusal, .unreadable(ETIMEDOUT), "too slow: refused")
        }
        kill(helper, SIGCONT)
        let peer = try client.pin(pid: getpid(), pidfd: nil, cookie: cookie)
        XCTAssertFalse(peer.executableChanged())
        XCTAssertFalse(gone.isSet)
    }

    func testItRefusesWhatItCannotProve() throws {
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        // The connection's client end held by no process: this one closes it first.
        let (otherCookie, other) = connection()
        close(other[1])
        defer { close(other[0]) }
        XCTAssertThrowsError(try client.pin(pid: getpid(), pidfd: nil, cookie: otherCookie)) { error in
            XCTAssertEqual(error as? PeerProcess.Refusal, .notHoldingConnection)
        }
        // A process that does not exist.
        XCTAssertThrowsError(try client.pin(pid: Int32.max, pidfd: nil, cookie: cookie)) { error in
            XCTAssertEqual(error as? PeerProcess.Refusal, .ended)
        }
        // Unknown handles are "changed": the connection ends rather than goes on unchecked.
        XCTAssertTrue(client.executableChanged(999))
    }

    /// Attack (issue 33's review): a user holds a flood of descriptors, so that the holders scan a
    /// terminal administration asks of the helper would take seconds — and the helper also pins
    /// every user's connections. A pin sent right behind the scan is answered first (the scan runs
    /// beside it; before 2026-11-30 the helper's one thread answered it only after the scan), and
    /// the scan gives up at its budget (`PtyMasterHolders.budget`) and says so (status 9). Counted
    /// in answers, not timed: without the budget the scan answers its holders (this process)
    /// instead, seconds later.
    func testAFloodOfDescriptorsCannotHoldTheHelper() throws {
        let flood = try DescriptorFlood(descriptors: 2_000_000)
        defer { flood.stop() }
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(master, 0)
        defer { close(master) }
        var index: UInt32 = 0
        XCTAssertEqual(ioctl(master, 0x8004_5430, &index), 0, "TIOCGPTN")
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }

        for request in [
            PeerHelper.request(.holders, handle: UInt64(index), sequence: 1),
            PeerHelper.request(.pin, pid: getpid(), cookie: cookie, sequence: 2),
        ] {
            XCTAssertEqual(send(daemonEnd, request, request.count, 0), request.count)
        }
        // The pin does not wait for the scan: it is answered first, and the scan at its budget.
        let pin = try XCTUnwrap(receive(), "the helper answered the pin")
        XCTAssertEqual(PeerHelper.read(pin, 16, UInt64.self), 2, "the pin, before the scan ended")
        XCTAssertEqual(PeerHelper.read(pin, 0, Int32.self), 0, "the pin was served")
        release(pin)
        let scan = try XCTUnwrap(receive(), "the helper answered the scan")
        XCTAssertEqual(PeerHelper.read(scan, 16, UInt64.self), 1)
        XCTAssertEqual(PeerHelper.read(scan, 0, Int32.self), 9, "the scan gave up at its budget")
        // What bounds the scan is the budget, half an answer's deadline (the daemon waits no longer).
        XCTAssertLessThanOrEqual(PtyMasterHolders.budget * 2, .seconds(PeerHelperClient.timeout))
    }

    /// Attack (system mode): a user makes the pin of their own connection slow — a process holding
    /// a flood of descriptors, which the pin searches for its connection (all of them, up to 65,536
    /// or a quarter of a second) — while another user's connection asks whether its process still runs the same
    /// program (before each request) and a third connection is pinned. Before, the helper answered
    /// one request at a time: both waited behind the flood's search, and a check that waited past
    /// its deadline ended that other user's connection. Now checks are answered at once and pins
    /// side by side: the flood's answer comes last. Ordered by answers: the flood's search (about
    /// 20,000 descriptors where the hard limit is 20,000, up to 60,000 elsewhere) outlasts a pin
    /// of this process (a few dozen) many times over.
    func testASlowPinHoldsNeitherAChecksAnswerNorAnotherPin() throws {
        let (flood, holder, cookie, ends) = try slowPinTarget()
        defer {
            flood.stop()
            for end in ends { close(end) }
        }
        let pin = PeerHelper.request(.pin, pid: getpid(), cookie: cookie, sequence: 100)
        XCTAssertEqual(send(daemonEnd, pin, pin.count, 0), pin.count)
        let pinned = try XCTUnwrap(receive())
        XCTAssertEqual(PeerHelper.read(pinned, 0, Int32.self), 0, "pinned")
        defer { release(pinned) }
        for request in [
            PeerHelper.request(.pin, pid: holder, cookie: cookie, sequence: 101),
            PeerHelper.request(.check, handle: PeerHelper.read(pinned, 8, UInt64.self), sequence: 102),
            PeerHelper.request(.pin, pid: getpid(), cookie: cookie, sequence: 103),
        ] {
            XCTAssertEqual(send(daemonEnd, request, request.count, 0), request.count)
        }
        var answers: [UInt64: Int32] = [:]
        var order: [UInt64] = []
        for _ in 0..<3 {
            let answer = try XCTUnwrap(receive(), "the helper answered")
            let sequence = PeerHelper.read(answer, 16, UInt64.self)
            order.append(sequence)
            answers[sequence] = PeerHelper.read(answer, 0, Int32.self)
            if sequence == 103 { release(answer) }
        }
        // Its search ends at the descriptors' end (not holding the connection) or at its bound.
        XCTAssertTrue([3, 8].contains(answers[101]), "the flood's process holds no such connection")
        XCTAssertEqual(answers[102], 0, "unchanged")
        XCTAssertEqual(answers[103], 0, "pinned")
        XCTAssertEqual(order.last, 101, "the flood's pin answered last: \(order)")
        XCTAssertFalse(gone.isSet)
    }

    /// The same through the daemon's client: a thread pinning the flood's process holds neither
    /// another connection's check nor another pin, which return while the flood's pin is still
    /// under way (before, every exchange waited for the one before it).
    func testTheClientLetsOthersExchangeWhileAPinIsSlow() throws {
        let (flood, holder, cookie, ends) = try slowPinTarget()
        defer {
            flood.stop()
            for end in ends { close(end) }
        }
        let pinned = try client.pin(pid: getpid(), pidfd: nil, cookie: cookie)
        let client = self.client
        let slowDone = DispatchSemaphore(value: 0)
        let slowResult = Mutex<PeerProcess.Refusal?>(nil)
        let asked = client.requestsSent
        startThread(named: "test-slow-pin") {
            do throws(PeerProcess.Refusal) {
                _ = try client.pin(pid: holder, pidfd: nil, cookie: cookie)
            } catch {
                slowResult.withLock { $0 = error }
            }
            slowDone.signal()
        }
        // Until the slow pin is on its way to the helper.
        let started = Date()
        while client.requestsSent == asked, Date().timeIntervalSince(started) < 60 { usleep(200) }
        XCTAssertEqual(client.requestsSent, asked + 1, "the slow pin was sent")
        XCTAssertFalse(pinned.executableChanged(), "a check answered")
        let other = try client.pin(pid: getpid(), pidfd: nil, cookie: cookie)
        XCTAssertEqual(other.identity, pinned.identity, "another pin answered")
        XCTAssertEqual(
            slowDone.wait(timeout: .now()),
            .timedOut,
            "both were answered while the flood's pin was still under way"
        )
        XCTAssertEqual(slowDone.wait(timeout: .now() + 30), .success)
        XCTAssertTrue([.notHoldingConnection, .tooManyDescriptors].contains(slowResult.withLock { $0 }))
        XCTAssertFalse(gone.isSet)
    }

    /// A process whose pin is slow — it holds a flood of descriptors (60,000, or all one process may
    /// hold), which the pin searches — and a connection this process holds.
    private func slowPinTarget() throws -> (flood: DescriptorFlood, holder: Int32, cookie: UInt64, ends: [Int32]) {
        let flood = try DescriptorFlood(descriptors: 60_000)
        guard let holder = flood.holders.first else {
            flood.stop()
            throw FloodHasNoHolder()
        }
        let (cookie, ends) = connection()
        return (flood, holder, cookie, ends)
    }

    private struct FloodHasNoHolder: Error {}

    /// Releases the peer a pin answer pinned (a test that pinned it through the raw socket).
    private func release(_ answer: [UInt8]) {
        let request = PeerHelper.request(.release, handle: PeerHelper.read(answer, 8, UInt64.self), sequence: 0)
        XCTAssertEqual(send(daemonEnd, request, request.count, 0), request.count)
    }

    /// The helper's next answer; nil if none came in two minutes (a stopped helper, not a slow one).
    private func receive() -> [UInt8]? {
        var ready = pollfd(fd: daemonEnd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 120_000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: PeerHelper.maxAnswer)
        let n = recv(daemonEnd, &buffer, buffer.count, 0)
        return n >= PeerHelper.headerSize ? Array(buffer[..<n]) : nil
    }

    /// `descriptors` descriptors held by a few processes of one group (each as many as the
    /// descriptor limit lets it: duplicates of one, so the kernel keeps little for them). Every
    /// process of it ends once the one that started it has, so a test killed midway leaves none
    /// behind for long; and a process that fails closes what the test reads, so it never hangs.
    private struct DescriptorFlood {
        let group: Process

        init(descriptors: Int) throws {
            group = Process()
            group.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            group.arguments = [
                "-c",
                """
                import os, resource, sys, time
                os.setpgid(0, 0)
                test = os.getppid()
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))
                except (ValueError, OSError):
                    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                each = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 64

                def hold(parent):
                    # Until the process that started this one is gone, however it went.
                    while os.getppid() == parent:
                        time.sleep(0.5)
                    os._exit(0)

                me = os.getpid()
                left = int(sys.argv[1])
                if -(-left // each) > 256:
                    print('small', flush=True)
                    sys.exit(0)
                while left > 0:
                    r, w = os.pipe()
                    if os.fork() == 0:
                        os.close(r)
                        os.dup2(os.open('/dev/null', os.O_WRONLY), 1)
                        one = os.open('/dev/null', os.O_RDONLY)
                        for _ in range(min(each, left)):
                            os.dup(one)
                        os.write(w, b'x')
                        os.close(w)
                        hold(me)
                    os.close(w)
                    if os.read(r, 1) != b'x':
                        sys.exit('a holder could not hold its descriptors')
                    os.close(r)
                    left -= each
                print('ready', flush=True)
                hold(test)
                """,
                String(descriptors),
            ]
            let out = Pipe()
            group.standardOutput = out
            try group.run()
            let said = String(decoding: out.fileHandleForReading.readData(ofLength: 6), as: UTF8.self)
            if said == "small\n" {
                stop()
                throw XCTSkip("this machine lets a process hold too few descriptors for the flood (over 256 processes)")
            }
            guard said == "ready\n" else {
                stop()
                throw FloodNotHeld(said: said)
            }
        }

        struct FloodNotHeld: Error {
            var said: String
        }

        /// The processes that hold the descriptors (the group's children).
        var holders: [Int32] {
            let pid = group.processIdentifier
            let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
            return children.split(separator: " ").compactMap {
                Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }

        /// The group and every process in it.
        func stop() {
            kill(-group.processIdentifier, SIGKILL)
            group.waitUntilExit()
        }
    }

    /// A system daemon's terminal check (issue 33): the helper, which may read every process, names
    /// each holder of a pseudo-terminal's master with its executable's path and file; an index
    /// nobody holds has none. A late holders answer is never taken for a pinned peer's.
    func testItNamesTheHoldersOfAPseudoTerminalsMaster() throws {
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(master, 0)
        defer { close(master) }
        var index: UInt32 = 0
        XCTAssertEqual(ioctl(master, 0x8004_5430, &index), 0, "TIOCGPTN")
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let holders = try XCTUnwrap(client.ptyHolders(index: index))
        XCTAssertEqual(
            holders,
            [TerminalHolders.Holder(pid: getpid(), executable: me, file: PeerProcess.fileID(AT_FDCWD, me))]
        )
        XCTAssertEqual(client.ptyHolders(index: 1 << 20 - 1), [], "pts/1048575 is held by nobody")
        // One process asked alone (a PAM request's emulator): it holds it, or another does not.
        XCTAssertEqual(client.ptyHolders(index: index, only: getpid()), holders)
        XCTAssertEqual(client.ptyHolders(index: index, only: helper), [], "the helper holds no such master")

        kill(helper, SIGSTOP)
        // One scan at a time for the whole daemon: a second, while the first waits, is refused.
        let client = self.client
        let pts = index
        let first = Thread { _ = client.ptyHolders(index: pts) }
        first.start()
        usleep(200_000)
        XCTAssertNil(client.ptyHolders(index: pts), "another scan is under way")
        usleep(1_000_000)
        XCTAssertNil(client.ptyHolders(index: index), "no answer in time: the daemon cannot say, and refuses")
        kill(helper, SIGCONT)
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        XCTAssertEqual(
            try client.pin(pid: getpid(), pidfd: nil, cookie: cookie).identity.name,
            me,
            "the late holders answer was dropped"
        )
        XCTAssertFalse(gone.isSet)
    }

    /// Holders travel as records: a path longer than a record holds is left out (the file still
    /// decides), a holder whose executable was unreadable has no file, and malformed records are nil.
    func testHolderRecordsRoundTrip() throws {
        let long = "/" + String(repeating: "a", count: 300)
        let holders: [TerminalHolders.Holder] = [
            .init(pid: 7, executable: "/usr/bin/tmux", file: .init(device: 2049, inode: 1234)),
            .init(pid: 8, executable: nil, file: nil),
            .init(pid: 9, executable: long, file: .init(device: 1, inode: 2)),
        ]
        let records = try XCTUnwrap(PeerHelper.records(of: holders))
        XCTAssertEqual(
            PeerHelper.holders(from: records[...]),
            [holders[0], holders[1], .init(pid: 9, executable: nil, file: .init(device: 1, inode: 2))]
        )
        XCTAssertEqual(PeerHelper.holders(from: []), [])
        XCTAssertNil(PeerHelper.holders(from: records.dropLast()), "a record cut short")
        var unknownFlag = records
        unknownFlag[4] = 2
        XCTAssertNil(PeerHelper.holders(from: unknownFlag[...]))
        XCTAssertNil(PeerHelper.records(of: Array(repeating: holders[0], count: 600)), "more than one answer holds")
    }

    /// A pin that succeeds after its request gave up pinned a peer for nobody: the client releases
    /// it when the late answer comes, so the helper does not keep it (and its descriptor) forever.
    func testAPeerPinnedTooLateIsReleased() throws {
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        kill(helper, SIGSTOP)
        XCTAssertThrowsError(try client.pin(pid: getpid(), pidfd: nil, cookie: cookie)) { error in
            XCTAssertEqual(error as? PeerProcess.Refusal, .unreadable(ETIMEDOUT))
        }
        kill(helper, SIGCONT)
        // Pins run side by side: the late one and this one take handles 1 and 2 in either order.
        let peer = try client.pin(pid: getpid(), pidfd: nil, cookie: cookie)
        XCTAssertTrue([1, 2].contains(peer.handle), "handle \(peer.handle)")
        let late: UInt64 = peer.handle == 1 ? 2 : 1
        // Its answer comes when it comes; the client releases the peer before counting it.
        let asked = Date()
        while client.latePinsReleased == 0, Date().timeIntervalSince(asked) < 60 { usleep(1000) }
        XCTAssertEqual(client.latePinsReleased, 1, "the late answer came, and its peer was released")
        XCTAssertTrue(client.executableChanged(late), "the helper no longer holds the late pin")
        XCTAssertFalse(peer.executableChanged())
    }

    /// A request that is not 32 bytes of a known operation gets "bad request", and the helper goes on.
    func testAMalformedRequestIsRefusedAndTheHelperGoesOn() throws {
        for garbage in [[UInt8](repeating: 0xFF, count: 32), [1, 2, 3], [UInt8](repeating: 1, count: 40)] {
            XCTAssertEqual(garbage.withUnsafeBytes { send(daemonEnd, $0.baseAddress, $0.count, 0) }, garbage.count)
            var ready = pollfd(fd: daemonEnd, events: Int16(POLLIN), revents: 0)
            XCTAssertEqual(poll(&ready, 1, 2000), 1)
            var answer = [UInt8](repeating: 0, count: 64)
            let n = recv(daemonEnd, &answer, answer.count, 0)
            XCTAssertGreaterThanOrEqual(n, PeerHelper.headerSize)
            XCTAssertEqual(PeerHelper.read(answer, 0, Int32.self), 6)
        }
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        XCTAssertNoThrow(try client.pin(pid: getpid(), pidfd: nil, cookie: cookie))
    }

    /// The helper gone (killed, crashed): every pin is refused, every pinned peer counts as
    /// changed, and the daemon is told it must stop (its service manager starts both again).
    func testAHelperThatIsGoneLetsNothingThrough() throws {
        let (cookie, ends) = connection()
        defer { for end in ends { close(end) } }
        let peer = try client.pin(pid: getpid(), pidfd: nil, cookie: cookie)
        var status: Int32 = 0
        kill(helper, SIGKILL)
        waitpid(helper, &status, 0)
        helper = 0
        XCTAssertThrowsError(try client.pin(pid: getpid(), pidfd: nil, cookie: cookie))
        XCTAssertTrue(peer.executableChanged())
        XCTAssertTrue(gone.isSet)
    }

    func testTheCapabilitiesAreReadFromTheKernelsStatus() {
        func status(_ prm: String, _ eff: String, _ amb: String) -> String {
            "Name:\tx\nCapInh:\t0000000000080004\nCapPrm:\t\(prm)\nCapEff:\t\(eff)\nCapAmb:\t\(amb)\n"
        }
        let none = "0000000000000000"
        let ptrace = "0000000000080000"
        let search = "0000000000000004"
        let other = "0000000000000001"
        XCTAssertEqual(
            PeerHelper.holdsPeerCapabilities(status: status(none, none, none)),
            false,
            "the inheritable set alone gives nothing"
        )
        XCTAssertEqual(PeerHelper.holdsPeerCapabilities(status: status(none, none, other)), false)
        XCTAssertEqual(
            PeerHelper.holdsPeerCapabilities(status: status(ptrace, none, none)),
            true,
            "permitted can be made effective"
        )
        XCTAssertEqual(PeerHelper.holdsPeerCapabilities(status: status(none, search, none)), true)
        XCTAssertEqual(PeerHelper.holdsPeerCapabilities(status: status(none, none, ptrace)), true)
        XCTAssertNil(PeerHelper.holdsPeerCapabilities(status: "nothing"), "unreadable: the caller assumes the worst")
        XCTAssertNil(PeerHelper.holdsPeerCapabilities(status: nil))
    }
}
