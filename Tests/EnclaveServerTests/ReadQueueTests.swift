import NIOCore
import XCTest

@testable import EnclaveServer

/// The rules between a connection's channel and its task, with numbers for the waiting task.
final class ReadQueueTests: XCTestCase {
    private typealias Queue = ReadQueue<Int>

    private func bytes(_ byte: UInt8) -> ByteBuffer { ByteBuffer(bytes: [byte]) }

    func testReadsAreTakenInTheOrderTheyCame() {
        var queue = Queue()
        XCTAssertNil(queue.push(bytes(1)))
        XCTAssertNil(queue.push(bytes(2)))
        XCTAssertEqual(queue.next(7), .take(bytes(1), readAgain: false))
        XCTAssertEqual(queue.next(7), .take(bytes(2), readAgain: false))
        XCTAssertEqual(queue.next(7), .wait)
    }

    func testATaskWaitingIsHandedTheNextReadAtOnce() {
        var queue = Queue()
        XCTAssertEqual(queue.next(7), .wait)
        XCTAssertEqual(queue.push(bytes(1)), 7)
        XCTAssertEqual(queue.count, 0, "the read went to the task, not into the queue")
        XCTAssertEqual(queue.next(8), .wait)
        XCTAssertEqual(queue.push(bytes(2)), 8)
    }

    func testTheClientsEndComesAfterTheReadsBeforeIt() {
        var queue = Queue()
        XCTAssertNil(queue.push(bytes(1)))
        XCTAssertNil(queue.end(.ended))
        XCTAssertNil(queue.push(bytes(2)), "nothing is read after the end")
        XCTAssertEqual(queue.next(7), .take(bytes(1), readAgain: false))
        XCTAssertEqual(queue.next(7), .end(.ended))
        XCTAssertEqual(queue.next(7), .end(.ended), "and again")
    }

    func testAnEndingWakesTheTaskWaiting() {
        var queue = Queue()
        XCTAssertEqual(queue.next(7), .wait)
        XCTAssertEqual(queue.end(.ended), 7)
        XCTAssertEqual(queue.next(7), .end(.ended))
    }

    func testAStopDropsWhatWasNotTakenEvenAfterTheClientsEnd() {
        var queue = Queue()
        XCTAssertNil(queue.push(bytes(1)))
        XCTAssertNil(queue.end(.ended))
        XCTAssertNil(queue.end(.stopped))
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.next(7), .end(.stopped))
        XCTAssertNil(queue.end(.ended), "a later end changes nothing")
        XCTAssertEqual(queue.next(7), .end(.stopped))
        var waiting = Queue()
        XCTAssertEqual(waiting.next(7), .wait)
        XCTAssertEqual(waiting.end(.stopped), 7)
    }

    func testTheChannelAsksForNoMoreWhileTheQueueIsFullAndAgainOnceItIsDrained() {
        var queue = Queue()
        for i in 0..<(Queue.highWatermark - 1) { XCTAssertNil(queue.push(bytes(UInt8(i)))) }
        XCTAssertTrue(queue.mayRead(), "below the high watermark")
        XCTAssertNil(queue.push(bytes(99)))
        XCTAssertFalse(queue.mayRead(), "at the high watermark")
        XCTAssertFalse(queue.mayRead())
        var readAgain: [Int] = []
        var taken = 0
        while case .take(_, let again) = queue.next(7) {
            taken += 1
            if again { readAgain.append(queue.count) }
        }
        XCTAssertEqual(taken, Queue.highWatermark)
        XCTAssertEqual(readAgain, [Queue.lowWatermark], "one read, once the task is down to the low watermark")
        XCTAssertTrue(queue.mayRead())
    }

    func testNoReadIsMadeAgainWhenNoneWasHeldBack() {
        var queue = Queue()
        for i in 0..<Queue.highWatermark { XCTAssertNil(queue.push(bytes(UInt8(i)))) }
        while case .take(_, let again) = queue.next(7) { XCTAssertFalse(again) }
    }
}
