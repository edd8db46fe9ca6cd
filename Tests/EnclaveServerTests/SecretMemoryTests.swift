import Crypto
import Foundation
import XCTest

@testable import EnclaveServer

/// A secret's pages are locked in memory: the mapping that holds its bytes counts them as locked
/// (/proc/self/smaps). The key is large enough to have a mapping of its own, so nothing else in
/// this process has locked it before.
final class SecretMemoryTests: XCTestCase {
    /// The kB /proc/self/smaps counts as locked in the mapping that holds `address`.
    private func lockedKilobytes(at address: UInt) throws -> Int? {
        // Read to the end: procfs files report no size, and a sized read stops at the first page.
        let smaps = String(
            decoding: try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps")).readToEnd() ?? Data(),
            as: UTF8.self
        )
        var inside = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
                let bounds = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inside = bounds.count == 2 && bounds[0] <= address && address < bounds[1]
            } else if inside, fields.first == "Locked:" {
                return fields.dropFirst().first.flatMap { Int($0) }
            }
        }
        return nil
    }

    func testAKeysPagesAreLockedInMemory() throws {
        let key = SymmetricKey(data: Data((0..<(512 * 1024)).map { _ in UInt8.random(in: 0...255) }))
        let address = key.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        XCTAssertEqual(try lockedKilobytes(at: address), 0, "a fresh mapping of its own")
        XCTAssertNil(SecretMemory.lock(key))
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(lockedKilobytes(at: address)), 512)
        _ = key.withUnsafeBytes { $0.count }  // the key lives, and stays locked, until here
    }
}
