import CPeerSocket
import Foundation
import Synchronization
import XCTest

@testable import EnclaveServer

final class DedicatedThreadTests: XCTestCase {
    func testASerialThreadRunsItsJobsInOrderOffTheCallersThreadAndEndsWithFinish() {
        let serial = SerialThread(name: "test.serial")
        let ran = Mutex<[Int]>([])
        let caller = pthread_self()
        let threads = Mutex<Set<UInt>>([])
        for i in 0..<100 {
            serial.async {
                ran.withLock { $0.append(i) }
                threads.withLock { _ = $0.insert(UInt(pthread_self())) }
            }
        }
        let finished = DispatchSemaphore(value: 0)
        XCTAssertTrue(serial.finish { finished.signal() })
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(ran.withLock { $0 }, Array(0..<100))
        let used = threads.withLock { $0 }
        XCTAssertEqual(used.count, 1, "one thread")
        XCTAssertFalse(used.contains(UInt(caller)))

        // Ended: a later job or finish runs nothing, and says so.
        serial.async { ran.withLock { $0.append(-1) } }
        XCTAssertFalse(serial.finish { ran.withLock { $0.append(-2) } })
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertEqual(ran.withLock { $0.count }, 100)
    }

    /// The name `ps -L` and /proc show, and tests count threads by. (Foundation's `Thread.name`
    /// also sets a name this short; what this holds is that the daemon's threads are named.)
    func testAThreadOfTheDaemonsOwnCarriesItsNameInTheKernel() {
        let named = Mutex<String>("")
        LoopThread(name: "la-prompt-keys") {
            var name = [CChar](repeating: 0, count: 16)
            _ = la_thread_name(&name)
            named.withLock { $0 = String(cString: name) }
        }.join()
        XCTAssertEqual(named.withLock { $0 }, "la-prompt-keys")
    }

    func testASerialThreadFinishedBeforeAnyJobRunsItsLastJobOnTheCaller() {
        let serial = SerialThread(name: "test.serial")
        let ranOn = Mutex<UInt?>(nil)
        XCTAssertTrue(serial.finish { ranOn.withLock { $0 = UInt(pthread_self()) } })
        XCTAssertEqual(ranOn.withLock { $0 }, UInt(pthread_self()))
        XCTAssertFalse(serial.finish {})
    }

    func testASerialThreadThatWasNeverGivenAJobStartsNoThread() {
        let before = threadCount()
        let idle = (0..<20).map { _ in SerialThread(name: "test.serial") }
        // Threads of earlier tests may end meanwhile; twenty started would show.
        XCTAssertLessThan(threadCount(), before + 10)
        withExtendedLifetime(idle) {}
    }

    private func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }
}
