import EnclaveClient
import EnclaveProtocol
import Foundation

/// The public key of a persisted right: usable whether or not the right is authorized; a
/// software P-256 key (SecKey's) that verifies and encrypts (ECIES).
public final class LAPublicKey: NSObject, Sendable {
    private let raw: Data
    let key: SecKey?

    init(bytes: Data) {
        raw = bytes
        key = SecKeyCreateWithData(
            bytes as CFData,
            [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic]
                as CFDictionary,
            nil
        )
    }

    /// The key in X9.63 form (04 ‖ x ‖ y), as SecKeyCopyExternalRepresentation gives it.
    public var bytes: Data { get async throws { raw } }

    @preconcurrency public func exportBytes(completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        completion(raw, nil)
    }

    public func canVerify(using algorithm: SecKeyAlgorithm) -> Bool {
        key.map { SecKeyIsAlgorithmSupported($0, .verify, algorithm) } ?? false
    }
    public func canEncrypt(using algorithm: SecKeyAlgorithm) -> Bool {
        key.map { SecKeyIsAlgorithmSupported($0, .encrypt, algorithm) } ?? false
    }

    /// Throws SecKey's error (`errSecVerifyFailed`) when the signature does not verify.
    public func verify(_ signedData: Data, signature: Data, algorithm: SecKeyAlgorithm) async throws {
        guard let key else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(errSecDecode)) }
        var error: Unmanaged<CFError>?
        guard SecKeyVerifySignature(key, algorithm, signedData as CFData, signature as CFData, &error) else {
            throw error!.takeRetainedValue() as Error
        }
    }

    public func encrypt(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        guard let key else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(errSecDecode)) }
        var error: Unmanaged<CFError>?
        guard let out = SecKeyCreateEncryptedData(key, algorithm, data as CFData, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return out as Data
    }

    @preconcurrency public func verify(
        _ signedData: Data,
        signature: Data,
        algorithm: SecKeyAlgorithm,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        deliver(completion) { try await self.verify(signedData, signature: signature, algorithm: algorithm) }
    }

    @preconcurrency public func encrypt(
        _ data: Data,
        algorithm: SecKeyAlgorithm,
        completion: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) {
        deliver(completion) { try await self.encrypt(data, algorithm: algorithm) }
    }
}
