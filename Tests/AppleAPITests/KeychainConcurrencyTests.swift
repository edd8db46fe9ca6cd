import Foundation
import LocalAuthenticationTesting
import Security
import Synchronization
import XCTest

/// SecItem calls from many threads and queues at once, as apps make them: keychain wrappers lock
/// only around their own calls, and apps call from GCD queues that no task-local reaches (so the
/// daemon is found through `$LAENCLAVED_SOCKET`, as an app's would be). Ten times KeychainSwift's
/// own concurrency test (1,000 writes against readers, deleters and clearers).
final class KeychainConcurrencyTests: XCTestCase {
    private static let writers = 10
    private static let writesPerWriter = 1_000
    private static let keysPerWriter = 20
    private static let readers = 4

    private static func query(_ account: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "concurrency",
            kSecAttrAccount as String: account,
        ]
    }

    private static func add(_ value: String, for account: String) -> OSStatus {
        var add = query(account)
        add[kSecValueData as String] = Data(value.utf8)
        return SecItemAdd(add as CFDictionary, nil)
    }

    /// Every item exists before the writers start, so each write is a `SecItemUpdate` that must
    /// succeed: an update that meets another write of the same item must not answer
    /// errSecItemNotFound (a wrapper's update-or-add would then meet errSecDuplicateItem).
    private static func update(_ value: String, for account: String) -> OSStatus {
        SecItemUpdate(query(account) as CFDictionary, [kSecValueData as String: Data(value.utf8)] as CFDictionary)
    }

    private static func get(_ account: String) -> (OSStatus, String?) {
        var q = query(account)
        q[kSecReturnData as String] = true
        var item: CFTypeRef?
        let status = SecItemCopyMatching(q as CFDictionary, &item)
        return (status, (item as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func testTenThousandWritesFromManyQueuesLoseNothing() throws {
        let enclave = try TestEnclave()
        let saved = ProcessInfo.processInfo.environment["LAENCLAVED_SOCKET"]
        setenv("LAENCLAVED_SOCKET", enclave.socketPath, 1)
        defer { if let saved { setenv("LAENCLAVED_SOCKET", saved, 1) } else { unsetenv("LAENCLAVED_SOCKET") } }

        for w in 0..<Self.writers {
            for k in 0..<Self.keysPerWriter { XCTAssertEqual(Self.add("none", for: "w\(w)-k\(k)"), errSecSuccess) }
        }
        XCTAssertEqual(Self.add("none", for: "shared"), errSecSuccess)
        let failures = Failures()
        let writing = DispatchGroup()
        let stop = StopFlag()
        // Each writer owns its keys (their last value is known) and also writes one key all share.
        for w in 0..<Self.writers {
            DispatchQueue(label: "writer-\(w)").async(group: writing) {
                for i in 0..<Self.writesPerWriter {
                    let own = "w\(w)-k\(i % Self.keysPerWriter)"
                    let status = Self.update("w\(w)-\(i)", for: i.isMultiple(of: 10) ? "shared" : own)
                    if status != errSecSuccess { failures.add("writer \(w), write \(i): status \(status)") }
                }
            }
        }
        // Readers see the first value or one written to that very key, never another's or a torn one.
        let reading = DispatchGroup()
        for r in 0..<Self.readers {
            DispatchQueue.global().async(group: reading) {
                var round = 0
                while !stop.isSet {
                    let w = (r + round) % Self.writers
                    let key = round.isMultiple(of: 7) ? "shared" : "w\(w)-k\(round % Self.keysPerWriter)"
                    let (status, value) = Self.get(key)
                    let prefix = key == "shared" ? "w" : "w\(w)-"
                    if status != errSecSuccess {
                        failures.add("reader \(r): \(key) status \(status)")
                    } else if value != "none" && !(value ?? "").hasPrefix(prefix) {
                        failures.add("reader \(r): \(key) read \(value ?? "nil")")
                    }
                    round += 1
                }
            }
        }
        // A deadlock would hold these groups forever: bounded, and said as such (not a timing assert).
        let finished = writing.wait(timeout: .now() + 600)
        stop.set()
        XCTAssertEqual(finished, .success, "the writers did not finish in 10 minutes: a deadlock")
        XCTAssertEqual(reading.wait(timeout: .now() + 60), .success, "the readers did not stop: a deadlock")
        XCTAssertEqual(failures.all, [])

        // No write lost: each owned key holds the last value its writer gave it.
        for w in 0..<Self.writers {
            for k in 0..<Self.keysPerWriter {
                let last = (0..<Self.writesPerWriter).last { $0 % Self.keysPerWriter == k && !$0.isMultiple(of: 10) }
                let (status, value) = Self.get("w\(w)-k\(k)")
                XCTAssertEqual(status, errSecSuccess, "w\(w)-k\(k)")
                XCTAssertEqual(value, last.map { "w\(w)-\($0)" } ?? "none", "w\(w)-k\(k)")
            }
        }
        let (status, shared) = Self.get("shared")
        XCTAssertEqual(status, errSecSuccess)
        let lastShared = Set((0..<Self.writers).map { "w\($0)-\(Self.writesPerWriter - 10)" })
        XCTAssertTrue(
            lastShared.contains(shared ?? ""),
            "the shared key holds one writer's last value: \(shared ?? "nil")"
        )
    }
}

private final class Failures: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ failure: String) { list.withLock { $0.append(failure) } }
    var all: [String] { list.withLock { Array($0.prefix(20)) } }
}

private final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
