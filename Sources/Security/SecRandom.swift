import Foundation

// Apple's randomization services (SecRandom.h): cryptographically secure random bytes, here
// from the standard library's `SystemRandomNumberGenerator` (the kernel's getrandom(2) on Linux).

/// A reference to a random number generator (Apple's `SecRandomRef`, an opaque C pointer).
public typealias SecRandomRef = OpaquePointer

/// The default random number generator: a synonym for `NULL`, as on Apple platforms.
/// (`nonisolated(unsafe)`: a constant nil pointer, never dereferenced, shared by nothing.)
nonisolated(unsafe) public let kSecRandomDefault: SecRandomRef! = nil

/// Fills `bytes` with `count` cryptographically secure random bytes (Apple's
/// `SecRandomCopyBytes`) and returns `errSecSuccess`. Only `kSecRandomDefault` exists, as on Apple
/// platforms; `rnd` is not read. A `count` of 0 succeeds and writes nothing. Our choices: a
/// negative `count` is `errSecParam` (Apple's parameter is a `size_t`); the kernel's generator
/// does not fail once the system has booted, so no other status is returned.
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    var generator = SystemRandomNumberGenerator()
    var offset = 0
    while offset < count {
        let word = generator.next()
        let n = min(8, count - offset)
        withUnsafeBytes(of: word) { (bytes + offset).copyMemory(from: $0.baseAddress!, byteCount: n) }
        offset += n
    }
    return errSecSuccess
}
