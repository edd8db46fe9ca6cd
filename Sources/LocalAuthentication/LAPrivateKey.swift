import EnclaveClient
import EnclaveProtocol
import Foundation

/// The private key of a persisted right: a Secure Enclave P-256 key that signs, decrypts (ECIES)
/// and agrees (ECDH) with the algorithms SecKey offers for such a key; private-key operations need
/// the right authorized. Our note: a right saved before rights could decrypt has a signing-only key
/// (`canDecrypt`/`canExchangeKeys` answer false for it).
public final class LAPrivateKey: NSObject, Sendable {
    private let blob: Data
    private let publicBytes: Data
    private let kind: KeyRequest.Kind
    public let publicKey: LAPublicKey
    private weak let right: LARight?

    init(blob: Data, publicKey: Data, kind: KeyRequest.Kind, right: LARight) {
        self.blob = blob
        self.publicBytes = publicKey
        self.kind = kind
        self.publicKey = LAPublicKey(bytes: publicKey)
        self.right = right
    }

    /// The key on the right's context as it is now: `deauthorize` gives the right a new one.
    private func key(on context: (any RequestContext)?) -> SecKey {
        SecKey.enclave(publicKey: publicBytes, blob: blob, kind: kind, context: context)
    }

    private var key: SecKey { key(on: nil) }

    public func canSign(using algorithm: SecKeyAlgorithm) -> Bool { SecKeyIsAlgorithmSupported(key, .sign, algorithm) }
    public func canDecrypt(using algorithm: SecKeyAlgorithm) -> Bool {
        SecKeyIsAlgorithmSupported(key, .decrypt, algorithm)
    }
    public func canExchangeKeys(using algorithm: SecKeyAlgorithm) -> Bool {
        SecKeyIsAlgorithmSupported(key, .keyExchange, algorithm)
    }

    /// A signature as SecKeyCreateSignature gives it (X9.62 DER for the X962 algorithms).
    public func sign(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        try await use { key, error in SecKeyCreateSignature(key, algorithm, data as CFData, error) as Data? }
    }

    public func decrypt(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        try await use { key, error in SecKeyCreateDecryptedData(key, algorithm, data as CFData, error) as Data? }
    }

    /// ECDH with `publicKey` (X9.63, as `LAPublicKey.bytes` gives it); `parameters` as
    /// SecKeyCopyKeyExchangeResult's.
    public func exchangeKeys(
        publicKey: Data,
        algorithm: SecKeyAlgorithm,
        parameters: [AnyHashable: Any]
    ) async throws -> Data {
        let attributes =
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary
        var problem: Unmanaged<CFError>?
        guard let peer = SecKeyCreateWithData(publicKey as CFData, attributes, &problem) else {
            throw problem!.takeRetainedValue() as Error
        }
        var named: [String: Any] = [:]
        for (key, value) in parameters {
            guard let name = (key.base as? String) ?? (key.base as? NSString).map({ String($0) }) else {
                throw LARightStoreError.unsupported(
                    "exchangeKeys parameters are keyed by kSecKeyKeyExchangeParameter… names, not \(key)"
                )
            }
            named[name] = value
        }
        let params = UncheckedBox(NSDictionary(dictionary: named))
        return try await use { key, error in
            SecKeyCopyKeyExchangeResult(key, algorithm, peer, params.value, error) as Data?
        }
    }

    @preconcurrency public func sign(
        _ data: Data,
        algorithm: SecKeyAlgorithm,
        completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        deliver(completion) { try await self.sign(data, algorithm: algorithm) }
    }

    @preconcurrency public func decrypt(
        _ data: Data,
        algorithm: SecKeyAlgorithm,
        completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        deliver(completion) { try await self.decrypt(data, algorithm: algorithm) }
    }

    @preconcurrency public func exchangeKeys(
        publicKey: Data,
        algorithm: SecKeyAlgorithm,
        parameters: [AnyHashable: Any],
        completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        let parameters = UncheckedBox(parameters)
        deliver(completion) {
            try await self.exchangeKeys(publicKey: publicKey, algorithm: algorithm, parameters: parameters.value)
        }
    }

    /// Runs one private-key operation once the right is authorized, off the cooperative pool (the
    /// SecKey call waits for the daemon). An authentication failure comes back as the `LAError` it
    /// was; anything else as SecKey's error (`NSOSStatusErrorDomain`).
    private func use(
        _ body: @escaping @Sendable (SecKey, UnsafeMutablePointer<Unmanaged<CFError>?>) -> Data?
    ) async throws -> Data {
        guard let right else { throw LAError(.invalidContext) }
        try right.requireAuthorized()
        let key = key(on: right.context)
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data, any Error>) in
            LAPrivateKey.queue.async {
                var error: Unmanaged<CFError>?
                if let out = body(key, &error) { return continuation.resume(returning: out) }
                let failure =
                    error?.takeRetainedValue()
                    ?? NSError(domain: NSOSStatusErrorDomain, code: Int(errSecInternalComponent))
                if let la = failure.userInfo[NSUnderlyingErrorKey] as? NSError, let e = LAError(la) {
                    return continuation.resume(throwing: e)
                }
                continuation.resume(throwing: failure)
            }
        }
    }

    private static let queue = DispatchQueue(label: "LocalAuthentication.LAPrivateKey", attributes: .concurrent)
}
