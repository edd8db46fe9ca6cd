import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthenticationTesting
import Security
import Synchronization

/// `la-bench secitem-threads [PAIRS]`: an app's keychain calls from 16 threads at once, as
/// wrappers make them — each thread stores a small generic password (`SecItemAdd`) and reads it
/// back (`SecItemCopyMatching`), PAIRS times (200 by default). Prints one JSON line with each
/// call's p50/p99 and the pairs per second, beside the limits measured in the same run (the raw
/// Unix-socket round trip, one durable commit); bench/keychain/secitem_threads.sh runs GNOME
/// Keyring's `gnome_keyring_threads.py` the same way, alternately.
enum SecItemThreadsBench {
    static let threads = 16

    static func run(pairsPerThread: Int) throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        defer { enclave.stop() }
        let adds = Mutex<[Double]>([])
        let copies = Mutex<[Double]>([])
        @Sendable func seconds(since start: UInt64) -> Double {
            Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
        let pairsPerSecond = try Bench.blockingThroughput(threads: threads, pairsPerThread) { t, i in
            let account = "thread\(t)-\(i)"
            let secret = Data("secret-\(t)-\(i)".utf8)
            // A thread does not inherit the task-local that names the test daemon: named per call.
            var start = DispatchTime.now().uptimeNanoseconds
            let added = enclave.run {
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench-threads",
                        kSecAttrAccount as String: account, kSecValueData as String: secret,
                    ] as CFDictionary,
                    nil
                )
            }
            let addTime = seconds(since: start)
            start = DispatchTime.now().uptimeNanoseconds
            var item: CFTypeRef?
            let copied = enclave.run {
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench-threads",
                        kSecAttrAccount as String: account, kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                )
            }
            let copyTime = seconds(since: start)
            guard added == errSecSuccess, copied == errSecSuccess, item as? Data == secret else {
                throw EnclaveClientError.protocolError("thread \(t), pair \(i): add \(added), copy \(copied)")
            }
            adds.withLock { $0.append(addTime) }
            copies.withLock { $0.append(copyTime) }
        }
        let raw = try RawSocketEcho.measure(iterations: 2000).sorted()
        let durable = RawSocketEcho.durableWrites(iterations: 500, directory: enclave.stateDirectory)
        func stats(_ xs: [Double]) -> String {
            let s = xs.sorted()
            return String(
                format: "{\"p50_ms\": %.3f, \"p99_ms\": %.3f}",
                s[s.count / 2] * 1e3,
                s[min(s.count - 1, Int(Double(s.count) * 0.99))] * 1e3
            )
        }
        print(
            "{\"peer\": \"laenclaved\", \"threads\": \(threads), \"pairs\": \(threads * pairsPerThread), "
                + "\"add\": \(stats(adds.withLock { $0 })), \"copy\": \(stats(copies.withLock { $0 })), "
                + String(
                    format: "\"pairs_per_s\": %.0f, \"raw_round_trip_us\": %.1f, \"durable_commits_per_s\": %.0f}",
                    pairsPerSecond,
                    raw[raw.count / 2] * 1e6,
                    Double(durable.count) / durable.reduce(0, +)
                )
        )
    }
}
