import Foundation
import LocalAuthentication
import LocalAuthenticationTesting
import Security

/// `la-bench keychain N`: store N generic passwords, 300 random lookups by attribute (with the
/// secret), 300 deletes by attribute — through SecItem calls, the real socket and daemon. Prints
/// one JSON line, the same shape as bench/keychain/gnome_keyring.py.
enum KeychainBench {
    static func run(items n: Int) throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        defer { enclave.stop() }
        func timed(_ body: () -> OSStatus) -> Double {
            let t = DispatchTime.now().uptimeNanoseconds
            let status = body()
            precondition(status == errSecSuccess, "status \(status)")
            return Double(DispatchTime.now().uptimeNanoseconds - t) / 1e9
        }
        var store: [Double] = [], lookups: [Double] = [], deletes: [Double] = []
        enclave.run {
            for i in 0..<n {
                store.append(timed {
                    SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                kSecAttrAccount as String: "user\(i)", kSecAttrLabel as String: "item \(i)",
                                kSecValueData as String: Data("secret-\(i)".utf8)] as CFDictionary, nil)
                })
            }
            var rng = SeededGenerator(seed: 7)
            for _ in 0..<300 {
                let j = Int.random(in: 0..<n, using: &rng)
                lookups.append(timed {
                    var item: CFTypeRef?
                    let status = SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                                      kSecAttrAccount as String: "user\(j)", kSecReturnData as String: true] as CFDictionary, &item)
                    precondition(item as? Data == Data("secret-\(j)".utf8))
                    return status
                })
            }
            var victims = Set<Int>()
            while victims.count < min(300, n) { victims.insert(Int.random(in: 0..<n, using: &rng)) }
            for j in victims {
                deletes.append(timed {
                    SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                   kSecAttrAccount as String: "user\(j)"] as CFDictionary)
                })
            }
        }
        func stats(_ xs: [Double]) -> String {
            let s = xs.sorted()
            let p50 = s[s.count / 2] * 1e3, p99 = s[min(s.count - 1, Int(Double(s.count) * 0.99))] * 1e3
            return String(format: "{\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"ops_per_s\": %.1f}", p50, p99, Double(s.count) / s.reduce(0, +))
        }
        print("{\"peer\": \"laenclaved\", \"items\": \(n), \"store\": \(stats(store)), \"lookup\": \(stats(lookups)), \"delete\": \(stats(deletes))}")
    }
}

/// Deterministic choices, so runs are repeatable.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension TestEnclave.Configuration {
    static func with(_ change: (inout TestEnclave.Configuration) -> Void) -> TestEnclave.Configuration {
        var c = TestEnclave.Configuration()
        change(&c)
        return c
    }
}
