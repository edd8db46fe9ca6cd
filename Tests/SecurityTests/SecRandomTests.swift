import Foundation
import Security
import XCTest

/// Apple's randomization services as wrappers call them (KeychainAccess's suite fills an
/// `NSMutableData`; apps fill a byte array).
final class SecRandomTests: XCTestCase {
    func testFillsAnArrayAsAppleSamplesDo() {
        var bytes = [UInt8](repeating: 0, count: 64)
        let status = SecRandomCopyBytes(kSecRandomDefault, bytes.count, &bytes)
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertNotEqual(bytes, [UInt8](repeating: 0, count: 64), "64 zero bytes: one chance in 2^512")
        var again = [UInt8](repeating: 0, count: 64)
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, again.count, &again), errSecSuccess)
        XCTAssertNotEqual(bytes, again)
    }

    func testFillsExactlyCountBytesOfAnNSMutableData() {
        for count in [1, 7, 8, 9, 31, 1000] {
            let data = NSMutableData(length: count + 8)!
            memset(data.mutableBytes, 0xAB, count + 8)
            XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, count, data.mutableBytes), errSecSuccess)
            let tail = Array((data as Data).suffix(8))
            XCTAssertEqual(tail, [UInt8](repeating: 0xAB, count: 8), "nothing past \(count) bytes is written")
        }
    }

    func testZeroAndNegativeCounts() {
        var byte: UInt8 = 0x5A
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, 0, &byte), errSecSuccess)
        XCTAssertEqual(byte, 0x5A)
        XCTAssertEqual(SecRandomCopyBytes(nil, -1, &byte), errSecParam)
        XCTAssertNil(kSecRandomDefault as SecRandomRef?)
    }

    func testBytesLookUniform() {
        // 64 KiB: each byte value about 256 times; a generator stuck on a pattern fails this.
        var bytes = [UInt8](repeating: 0, count: 65_536)
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, bytes.count, &bytes), errSecSuccess)
        var counts = [Int](repeating: 0, count: 256)
        for b in bytes { counts[Int(b)] += 1 }
        XCTAssertLessThan(counts.max()!, 400)
        XCTAssertGreaterThan(counts.min()!, 140)
    }
}
