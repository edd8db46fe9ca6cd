import Crypto
import EnclaveProtocol
import Foundation

/// ANSI X9.63's KDF (SEC 1 §3.6.1), as `SecKeyCopyKeyExchangeResult`'s …StandardX963… algorithms
/// ask: the blocks H(Z ‖ counter ‖ sharedInfo), counter from 1, big-endian, over swift-crypto's
/// hashes. swift-crypto derives it only from its own `SharedSecret`, which a secret computed inside
/// a TPM cannot become; this serves both roots, and its test holds it to swift-crypto's output.
public enum X963KeyDerivation {
    public static func derive(_ d: KeyDerivation, sharedSecret: Data) -> Data {
        switch d.hash {
        case .sha1: derive(Insecure.SHA1.self, sharedSecret, d)
        case .sha256: derive(SHA256.self, sharedSecret, d)
        case .sha384: derive(SHA384.self, sharedSecret, d)
        case .sha512: derive(SHA512.self, sharedSecret, d)
        }
    }

    private static func derive<H: HashFunction>(_: H.Type, _ secret: Data, _ d: KeyDerivation) -> Data {
        var out = Data(capacity: d.byteCount + H.Digest.byteCount)
        var counter: UInt32 = 1
        while out.count < d.byteCount {
            var hasher = H()
            hasher.update(data: secret)
            withUnsafeBytes(of: counter.bigEndian) { hasher.update(bufferPointer: $0) }
            hasher.update(data: d.sharedInfo)
            hasher.finalize().withUnsafeBytes { out.append(contentsOf: $0) }
            counter += 1
        }
        return Data(out.prefix(d.byteCount))
    }
}
