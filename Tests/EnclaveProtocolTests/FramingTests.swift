import EnclaveProtocol
import XCTest

final class FramingTests: XCTestCase {
    private func header(_ n: Int) -> [UInt8] {
        [UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
    }

    func testEncoderWritesBigEndianLength() {
        let payload = [UInt8](repeating: 7, count: 258)
        let frame = FrameEncoder.frame(payload)
        XCTAssertEqual(Array(frame.prefix(4)), [0, 0, 1, 2])
        XCTAssertEqual(Array(frame.dropFirst(4)), payload)
    }

    func testSingleFrameInOneAppend() throws {
        var d = FrameDecoder()
        d.append(FrameEncoder.frame(Array("hello".utf8)))
        XCTAssertEqual(try d.nextFrame(), Array("hello".utf8))
        XCTAssertNil(try d.nextFrame())
        XCTAssertNoThrow(try d.finish())
    }

    func testFramesSplitByteByByte() throws {
        let payloads: [[UInt8]] = [Array("first".utf8), Array(repeating: 0xAB, count: 300), Array("x".utf8)]
        var d = FrameDecoder()
        var received: [[UInt8]] = []
        for byte in payloads.flatMap(FrameEncoder.frame) {
            d.append([byte])
            while let f = try d.nextFrame() { received.append(f) }
        }
        XCTAssertEqual(received, payloads)
        XCTAssertNoThrow(try d.finish())
    }

    func testNothingUntilTheLastByteArrives() throws {
        let frame = FrameEncoder.frame(Array("abcdef".utf8))
        var d = FrameDecoder()
        for byte in frame.dropLast() {
            d.append([byte])
            XCTAssertNil(try d.nextFrame())
        }
        d.append([frame.last!])
        XCTAssertEqual(try d.nextFrame(), Array("abcdef".utf8))
    }

    func testSeveralFramesInOneAppend() throws {
        let payloads = (1...5).map { Array("message \($0)".utf8) }
        var d = FrameDecoder()
        d.append(payloads.flatMap(FrameEncoder.frame))
        for p in payloads { XCTAssertEqual(try d.nextFrame(), p) }
        XCTAssertNil(try d.nextFrame())
        XCTAssertNoThrow(try d.finish())
    }

    func testFrameAndAHalfThenTheRest() throws {
        let a = FrameEncoder.frame(Array("alpha".utf8))
        let b = FrameEncoder.frame(Array("bravo".utf8))
        var d = FrameDecoder()
        d.append(a + b.prefix(6))
        XCTAssertEqual(try d.nextFrame(), Array("alpha".utf8))
        XCTAssertTrue(d.holdsMore, "the start of bravo waits behind alpha")
        XCTAssertNil(try d.nextFrame())
        d.append(b.dropFirst(6))
        XCTAssertEqual(try d.nextFrame(), Array("bravo".utf8))
        XCTAssertFalse(d.holdsMore, "nothing behind bravo")
    }

    func testManyFramesAcrossBufferCompaction() throws {
        // Enough traffic to cross the decoder's internal compaction threshold several times.
        var d = FrameDecoder()
        var stream: [UInt8] = []
        var expected: [[UInt8]] = []
        for i in 0..<3000 {
            let p = Array("payload-\(i)".utf8)
            expected.append(p)
            stream += FrameEncoder.frame(p)
        }
        var received: [[UInt8]] = []
        var offset = 0
        var chunk = 1
        while offset < stream.count {
            let end = min(stream.count, offset + chunk)
            d.append(stream[offset..<end])
            offset = end
            chunk = chunk % 997 + 13
            while let f = try d.nextFrame() { received.append(f) }
        }
        XCTAssertEqual(received, expected)
        XCTAssertNoThrow(try d.finish())
    }

    func testMaximumSizeFrameAccepted() throws {
        let payload = [UInt8](repeating: 1, count: WireLimits.maxPayloadBytes)
        var d = FrameDecoder()
        d.append(FrameEncoder.frame(payload))
        XCTAssertEqual(try d.nextFrame()?.count, WireLimits.maxPayloadBytes)
    }

    func testOversizedDeclaredLengthRejectedFromHeaderAlone() {
        var d = FrameDecoder()
        d.append(header(WireLimits.maxPayloadBytes + 1))
        XCTAssertThrowsError(try d.nextFrame()) { error in
            XCTAssertEqual(error as? WireError, .oversizedFrame(declared: 65537))
        }
        var huge = FrameDecoder()
        huge.append([0xff, 0xff, 0xff, 0xff])
        XCTAssertThrowsError(try huge.nextFrame()) { error in
            XCTAssertEqual(error as? WireError, .oversizedFrame(declared: 4_294_967_295))
        }
    }

    func testZeroLengthFrameIsEmptyError() {
        var d = FrameDecoder()
        d.append([0, 0, 0, 0])
        XCTAssertThrowsError(try d.nextFrame()) { error in
            XCTAssertEqual(error as? WireError, .emptyFrame)
        }
    }

    func testFinishWithPartialPayloadIsTruncated() throws {
        var d = FrameDecoder()
        d.append(FrameEncoder.frame(Array("complete".utf8)))
        d.append(FrameEncoder.frame(Array("partial".utf8)).prefix(7))
        XCTAssertEqual(try d.nextFrame(), Array("complete".utf8))
        XCTAssertNil(try d.nextFrame())
        XCTAssertThrowsError(try d.finish()) { error in
            XCTAssertEqual(error as? WireError, .truncatedFrame(pendingBytes: 7))
        }
    }

    func testFinishWithPartialHeaderIsTruncated() {
        var d = FrameDecoder()
        d.append([0, 0])
        XCTAssertThrowsError(try d.finish()) { error in
            XCTAssertEqual(error as? WireError, .truncatedFrame(pendingBytes: 2))
        }
    }

    func testFinishOnFreshDecoderIsClean() {
        XCTAssertNoThrow(try FrameDecoder().finish())
    }

    func testErrorDescriptionsAreClear() {
        XCTAssertEqual(
            WireError.oversizedFrame(declared: 70000).message,
            "frame of 70000 bytes exceeds the limit of 65536 bytes"
        )
        XCTAssertEqual(WireError.emptyFrame.message, "frame with an empty payload")
        XCTAssertEqual(
            WireError.truncatedFrame(pendingBytes: 3).message,
            "stream ended inside a frame (3 bytes pending)"
        )
    }
}
