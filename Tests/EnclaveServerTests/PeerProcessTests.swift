import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

@testable import EnclaveServer

#if canImport(Glibc)
import Glibc
#endif

/// `PeerProcess` against real client processes on a listener of the test's own: what the daemon
/// pins at accept and what it notices later. Each case runs with SO_PEERPIDFD and without it (the
/// path for kernels before 6.5).
final class PeerProcessTests: XCTestCase {
    private var directory: String!
    private var listener: Int32 = -1
    private var clients: [Process] = []

    /// argv: socket path, mode. Connects (close-on-exec, as Python makes every socket), then acts
    /// on `mode`; the "-later" modes first say "c" and wait for the test's "g".
    static let client = """
        import os, socket, sys, time
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        mode = sys.argv[2]
        def become_sleep(inherit):
            if inherit:
                os.set_inheritable(s.fileno(), True)
            os.execv('/bin/sleep', ['sleep', '20'])
        if mode == 'exec-now':
            become_sleep(False)
        if mode == 'exec-now-child-keeps':
            if os.fork() == 0:
                time.sleep(3)
                os._exit(0)
            become_sleep(False)
        if mode == 'exec-now-inheriting':
            become_sleep(True)
        if mode == 'exit-now':
            if os.fork() == 0:
                time.sleep(1)
            os._exit(0)
        if mode == 'many-descriptors':
            held = [os.dup(s.fileno()) for _ in range(1100)]
        s.sendall(b'c')
        s.recv(1)
        if mode == 'exec-later':
            become_sleep(True)
        time.sleep(20)
        """

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "peer-process-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((directory + "/s").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(listener, 8), 0)
    }

    override func tearDown() {
        for client in clients where client.isRunning { kill(client.processIdentifier, SIGKILL) }
        close(listener)
        try? FileManager.default.removeItem(atPath: directory)
    }

    private struct Accepted {
        var fd: Int32
        var credentials: PeerCredentials
        var pidfd: Int32?
        var cookie: UInt64
    }

    private func start(_ mode: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", Self.client, directory + "/s", mode]
        try p.run()
        clients.append(p)
        return p
    }

    private func accept(withPidfd: Bool) throws -> Accepted {
        let fd = Glibc.accept(listener, nil, nil)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let credentials = try XCTUnwrap(PeerCredentials.of(socket: fd))
        var pidfd: Int32 = -1
        var cookie: UInt64 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if withPidfd {
            XCTAssertEqual(
                getsockopt(fd, SOL_SOCKET, la_so_peerpidfd, &pidfd, &length),
                0,
                "this kernel has SO_PEERPIDFD"
            )
        }
        length = socklen_t(MemoryLayout<UInt64>.size)
        XCTAssertEqual(getsockopt(fd, SOL_SOCKET, la_so_cookie, &cookie, &length), 0)
        return Accepted(fd: fd, credentials: credentials, pidfd: withPidfd ? pidfd : nil, cookie: cookie)
    }

    private func release(_ a: Accepted) {
        close(a.fd)
        if let pidfd = a.pidfd { close(pidfd) }
    }

    private func waitUntil(_ what: String, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !condition() && Date() < deadline { usleep(2_000) }
        XCTAssertTrue(condition(), what)
    }

    private func executable(of pid: Int32) -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
    }

    private func eachWay(_ body: (_ withPidfd: Bool) throws -> Void) rethrows {
        for withPidfd in [true, false] { try body(withPidfd) }
    }

    func testAProcessHoldingItsConnectionIsPinnedToTheFileItRuns() throws {
        try eachWay { withPidfd in
            let client = try start("wait")
            let a = try accept(withPidfd: withPidfd)
            defer { release(a) }
            XCTAssertEqual(
                recv(
                    a.fd,
                    [UInt8](repeating: 0, count: 1).withUnsafeBufferPointer {
                        UnsafeMutableRawPointer(mutating: $0.baseAddress!)
                    },
                    1,
                    0
                ),
                1
            )
            let process = try PeerProcess(pid: a.credentials.pid, pidfd: a.pidfd)
            XCTAssertNoThrow(try process.confirmHolds(connectionCookie: a.cookie))
            let python = try FileManager.default.destinationOfSymbolicLink(
                atPath: "/proc/\(client.processIdentifier)/exe"
            )
            XCTAssertEqual(process.identity, AppIdentity(name: python, kind: .interpreter))
            XCTAssertFalse(process.executableChanged())
        }
    }

    /// A client that holds its connection among tens of thousands of descriptors would hold the
    /// pin (in system mode, the helper every client shares) while they are searched: past the
    /// bound (65,536; here 1,000, as a test's descriptor limit allows) the daemon refuses it
    /// rather than search on.
    func testAClientWithTooManyDescriptorsIsRefusedWithoutASearchWithoutEnd() throws {
        let client = try start("many-descriptors")
        let a = try accept(withPidfd: false)
        defer { release(a) }
        XCTAssertEqual(
            recv(
                a.fd,
                [UInt8](repeating: 0, count: 1).withUnsafeBufferPointer {
                    UnsafeMutableRawPointer(mutating: $0.baseAddress!)
                },
                1,
                0
            ),
            1,
            "the client is ready (pid \(client.processIdentifier))"
        )
        let process = try PeerProcess(pid: a.credentials.pid, pidfd: nil)
        XCTAssertThrowsError(try process.confirmHolds(connectionCookie: a.cookie, searchingAtMost: 1000)) {
            XCTAssertEqual($0 as? PeerProcess.Refusal, .tooManyDescriptors)
        }
        XCTAssertNoThrow(
            try process.confirmHolds(connectionCookie: a.cookie, searchingAtMost: 2000),
            "under the bound: searched"
        )
    }

    func testAProcessThatExecdBeforeThePinHasLostTheConnection() throws {
        try eachWay { withPidfd in
            let cases: [(String, PeerProcess.Refusal)] = [
                ("exec-now", .notHoldingConnection), ("exec-now-child-keeps", .notHoldingConnection),
                ("exec-now-inheriting", .inheritableConnection),
            ]
            for (mode, refusal) in cases {
                let client = try start(mode)
                let a = try accept(withPidfd: withPidfd)
                defer { release(a) }
                waitUntil("the client became sleep") { executable(of: client.processIdentifier).hasSuffix("/sleep") }
                // The executable read now is the new one: what the daemon saw of an exec that beat it.
                let process = try PeerProcess(pid: a.credentials.pid, pidfd: a.pidfd)
                XCTAssertTrue(process.executablePath.hasSuffix("/sleep"))
                XCTAssertThrowsError(try process.confirmHolds(connectionCookie: a.cookie), mode) {
                    XCTAssertEqual($0 as? PeerProcess.Refusal, refusal, mode)
                }
            }
        }
    }

    func testAnExecAfterThePinIsNoticed() throws {
        try eachWay { withPidfd in
            let client = try start("exec-later")
            let a = try accept(withPidfd: withPidfd)
            defer { release(a) }
            var byte: UInt8 = 0
            XCTAssertEqual(recv(a.fd, &byte, 1, 0), 1)
            let process = try PeerProcess(pid: a.credentials.pid, pidfd: a.pidfd)
            XCTAssertNoThrow(try process.confirmHolds(connectionCookie: a.cookie))
            XCTAssertFalse(process.executableChanged())
            byte = UInt8(ascii: "g")
            XCTAssertEqual(send(a.fd, &byte, 1, 0), 1)
            waitUntil("the exec is seen") { process.executableChanged() }
            XCTAssertTrue(executable(of: client.processIdentifier).hasSuffix("/sleep"))
        }
    }

    func testAProcessThatEndedIsNeitherPinnedNorServed() throws {
        try eachWay { withPidfd in
            // Ended before the pin: its socket lives on in a child, which is not who connected.
            let early = try start("exit-now")
            let a = try accept(withPidfd: withPidfd)
            defer { release(a) }
            early.waitUntilExit()
            XCTAssertThrowsError(try PeerProcess(pid: a.credentials.pid, pidfd: a.pidfd)) {
                XCTAssertEqual($0 as? PeerProcess.Refusal, .ended)
            }
            // Ended after the pin: noticed before the next request.
            let late = try start("wait")
            let b = try accept(withPidfd: withPidfd)
            defer { release(b) }
            var byte: UInt8 = 0
            XCTAssertEqual(recv(b.fd, &byte, 1, 0), 1)
            let process = try PeerProcess(pid: b.credentials.pid, pidfd: b.pidfd)
            XCTAssertFalse(process.executableChanged())
            kill(late.processIdentifier, SIGKILL)
            late.waitUntilExit()
            XCTAssertTrue(process.executableChanged())
        }
    }

    /// Attack: a directory entry is read no further than its name. The entry here is the last of
    /// its buffer and ends where an unreadable page begins, as `readdir`'s last record of a full
    /// buffer may (a user holding thousands of descriptors makes the pin scan and the pty scan
    /// read such buffers); copying the whole 256-byte `d_name` ran into that page and crashed the
    /// peer helper.
    func testADirectoryEntryIsReadNoFurtherThanItsName() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try XCTUnwrap(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        XCTAssertNotEqual(mapping, MAP_FAILED)
        defer { munmap(mapping, 2 * page) }
        XCTAssertEqual(mprotect(mapping + page, page, PROT_NONE), 0)
        let name = Array("1358".utf8) + [0]
        let offset = MemoryLayout<dirent>.offset(of: \.d_name)!
        // The record starts where its name ends at the unreadable page, aligned for a dirent.
        let start = page - offset - name.count
        XCTAssertEqual(start % MemoryLayout<dirent>.alignment, 0)
        let record = mapping + start
        record.storeBytes(
            of: UInt16(offset + name.count),
            toByteOffset: MemoryLayout<dirent>.offset(of: \.d_reclen)!,
            as: UInt16.self
        )
        (record + offset).copyMemory(from: name, byteCount: name.count)
        XCTAssertEqual(PeerProcess.entryName(record.assumingMemoryBound(to: dirent.self)), "1358")
    }
}
