import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class ShutdownTests: XCTestCase {
    func testSIGTERMDuringAPromptAnswersTheClientAndRemovesTheSocket() async throws {
        let enclave = try TestEnclave()
        let code = await enclave.run { () async -> LAError.Code? in
            async let outcome = evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            try? eventually("the prompt to open") { try enclave.status().promptOpen }
            enclave.stop()
            return await outcome
        }
        XCTAssertEqual(code, .systemCancel)
        XCTAssertFalse(FileManager.default.fileExists(atPath: enclave.socketPath), "a graceful stop removes the socket")
        try enclave.start()
        XCTAssertTrue(try enclave.status().passcodeSet, "state intact after the graceful stop")
    }

    /// Attack: a client sends requests and never reads, until the daemon's answers wait for room in
    /// its socket (fewer than the 256 that close the connection), then the daemon is told to stop.
    /// Before, the connection's end waited for those answers to be written — for ever — and the
    /// daemon never stopped (systemd kills it 90 s later, in the middle of whatever it does then).
    func testAClientThatStopsReadingCannotHoldTheDaemonsStop() throws {
        let enclave = try TestEnclave()
        let client = try RawClient(path: enclave.socketPath)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        client.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertNotNil(try client.readReply())
        /// Bytes the daemon sent that wait to be read, and bytes sent that the daemon has not read
        /// (SIOCINQ and SIOCOUTQ, which glibc names after the terminal's).
        func queues() -> (unread: Int32, unsent: Int32) {
            var (unread, unsent): (Int32, Int32) = (0, 0)
            _ = ioctl(client.fd, UInt(FIONREAD), &unread)
            _ = ioctl(client.fd, UInt(TIOCOUTQ), &unsent)
            return (unread, unsent)
        }
        // Until eight requests in a row, 25 ms apart, were all read by the daemon and left the bytes
        // waiting for the client unchanged: their answers wait in the daemon.
        var (id, unchanged, last) = (UInt64(2), 0, Int32(-1))
        while unchanged < 8 && id < 5_000 {
            guard client.sendRequest(id: id, op: "status") else { return XCTFail("the daemon closed the connection") }
            id += 1
            usleep(25_000)
            let now = queues()
            unchanged = now.unread == last && now.unread > 0 && now.unsent == 0 ? unchanged + 1 : 0
            last = now.unread
        }
        XCTAssertEqual(unchanged, 8, "the answers never waited: \(id) requests, \(last) bytes unread")
        XCTAssertTrue(enclave.stop(within: 20), "the daemon did not stop within 20 s of SIGTERM")
        XCTAssertFalse(FileManager.default.fileExists(atPath: enclave.socketPath), "a graceful stop removes the socket")
        // What waited was dropped with the connection: fewer answers than requests reached the client.
        var answers = 0
        while case .payload = client.readFrame(timeout: 5) { answers += 1 }
        XCTAssertLessThan(answers, Int(id) - 1, "every answer was written: none waited")
        try enclave.start()
        XCTAssertTrue(try enclave.status().passcodeSet, "state intact after the stop")
    }
}
