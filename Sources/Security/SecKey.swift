import Crypto
import EnclaveClient
import EnclaveProtocol
import Foundation
import _CryptoExtras

/// Apple's `SecKey`: an asymmetric key. Software keys (P-256/384/521, RSA) live in this process
/// and compute with swift-crypto; Secure Enclave keys (P-256, `kSecAttrTokenIDSecureEnclave`) are
/// sealed blobs only laenclaved can use, and each use is checked against the key's access control
/// there, as CryptoKit's `SecureEnclave.P256` keys are.
///
/// Our choices where Apple is silent or the platform differs are listed with each function and in
/// docs/apple-api-coverage.md.
public final class SecKey: CustomStringConvertible, Sendable {
    enum Material {
        case ec(ECKeyMaterial)
        case rsaPrivate(_RSA.Signing.PrivateKey)
        case rsaPublic(_RSA.Signing.PublicKey)
        case enclave(EnclaveKeyMaterial)
    }

    let material: Material
    /// The keychain attributes it was stored or found with (tag, label, access group…).
    let itemAttributes: [String: KeychainValue]

    init(_ material: Material, itemAttributes: [String: KeychainValue] = [:]) {
        self.material = material
        self.itemAttributes = itemAttributes
    }

    var isPrivate: Bool {
        switch material {
        case .ec(let k): return k.isPrivate
        case .rsaPrivate, .enclave: return true
        case .rsaPublic: return false
        }
    }

    var isRSA: Bool {
        switch material {
        case .rsaPrivate, .rsaPublic: return true
        case .ec, .enclave: return false
        }
    }

    var sizeInBits: Int {
        switch material {
        case .ec(let k): return k.curve.bits
        case .rsaPrivate(let k): return k.keySizeInBits
        case .rsaPublic(let k): return k.keySizeInBits
        case .enclave: return 256
        }
    }

    /// The public half's external representation.
    var publicExternalRepresentation: Data {
        switch material {
        case .ec(let k): return k.publicX963
        case .rsaPrivate(let k): return k.publicKey.pkcs1DERRepresentation
        case .rsaPublic(let k): return k.pkcs1DERRepresentation
        case .enclave(let k): return k.publicX963
        }
    }

    /// Apple's `kSecAttrApplicationLabel` of a key: the SHA-1 of its public key.
    var applicationLabel: Data { Data(Insecure.SHA1.hash(data: publicExternalRepresentation)) }

    var publicKey: SecKey {
        switch material {
        case .ec(let k): return SecKey(.ec(k.publicKey))
        case .rsaPrivate(let k): return SecKey(.rsaPublic(k.publicKey))
        case .rsaPublic: return self
        case .enclave(let k):
            return SecKey(.ec(ECKeyMaterial(curve: .p256, publicX963: k.publicX963, privateScalar: nil)))
        }
    }

    /// The attributes Apple's keychain keeps for a key item, and `SecKeyCopyAttributes` reports.
    var keyAttributes: [String: KeychainValue] {
        var a: [String: KeychainValue] = [
            "class": .string("keys"),
            "kcls": .string(isPrivate ? "1" : "0"),
            "type": .string(isRSA ? "42" : "73"),
            "bsiz": .int(Int64(sizeInBits)),
            "klbl": .data(applicationLabel),
        ]
        if case .enclave = material { a["tkid"] = .string(kSecAttrTokenIDSecureEnclave as String) }
        return a
    }

    /// What a key item holds as its data: the external representation, or for a Secure Enclave
    /// key its public key and sealed blob (opaque to apps, as Apple's token data is).
    var itemData: Data {
        switch material {
        case .ec(let k): return k.externalRepresentation
        case .rsaPrivate(let k): return k.derRepresentation
        case .rsaPublic(let k): return k.pkcs1DERRepresentation
        case .enclave(let k): return k.publicX963 + k.blob
        }
    }

    /// The Secure Enclave key an item made of this key holds: the daemon deletes it with the item.
    var heldKey: Data? {
        if case .enclave(let k) = material { return k.blob }
        return nil
    }

    /// A key read back from a key item's data and attributes.
    static func fromItem(
        data: Data,
        attributes: [String: KeychainValue],
        context: (any RequestContext)?,
        reason: String?
    ) throws(SecFailure) -> SecKey {
        if case .string(let token)? = attributes["tkid"], token == kSecAttrTokenIDSecureEnclave as String {
            guard data.count > 65, data.first == 0x04 else {
                throw SecFailure(errSecDecode, "the Secure Enclave key item is damaged")
            }
            let material = EnclaveKeyMaterial(
                publicX963: Data(data.prefix(65)),
                blob: Data(data.dropFirst(65)),
                context: context,
                reason: reason
            )
            return SecKey(.enclave(material), itemAttributes: attributes)
        }
        func string(_ key: String) -> String? {
            if case .string(let v)? = attributes[key] { return v }
            return nil
        }
        let type = string("type") ?? "73"
        let keyClass = string("kcls") ?? "1"
        return try SecKey(data: data, type: type, keyClass: keyClass, itemAttributes: attributes)
    }

    /// A software key from Apple's external representation (`SecKeyCreateWithData`).
    convenience init(
        data: Data,
        type: String,
        keyClass: String,
        itemAttributes: [String: KeychainValue] = [:]
    ) throws(SecFailure) {
        switch type {
        case "73":
            guard keyClass == "0" || keyClass == "1" else {
                throw SecFailure(
                    errSecParam,
                    "kSecAttrKeyClass must be kSecAttrKeyClassPublic or kSecAttrKeyClassPrivate"
                )
            }
            self.init(
                .ec(try ECKeyMaterial(externalRepresentation: data, isPrivate: keyClass == "1")),
                itemAttributes: itemAttributes
            )
        case "42":
            do {
                if keyClass == "1" {
                    self.init(
                        .rsaPrivate(try _RSA.Signing.PrivateKey(unsafeDERRepresentation: data)),
                        itemAttributes: itemAttributes
                    )
                } else {
                    self.init(
                        .rsaPublic(try _RSA.Signing.PublicKey(unsafeDERRepresentation: data)),
                        itemAttributes: itemAttributes
                    )
                }
            } catch {
                throw SecFailure(
                    errSecDecode,
                    "not a PKCS#1 RSA \(keyClass == "1" ? "private" : "public") key of 1024 bits or more"
                )
            }
        default:
            throw SecFailure(
                errSecParam,
                "kSecAttrKeyType must be kSecAttrKeyTypeECSECPrimeRandom or kSecAttrKeyTypeRSA"
            )
        }
        if keyClass != "0" && keyClass != "1" {
            throw SecFailure(errSecParam, "kSecAttrKeyClass must be kSecAttrKeyClassPublic or kSecAttrKeyClassPrivate")
        }
    }

    /// A Secure Enclave key held elsewhere in this package (a persisted right's key), used on
    /// `context` like any SecKey.
    package static func enclave(
        publicKey: Data,
        blob: Data,
        kind: KeyRequest.Kind,
        context: (any RequestContext)?
    ) -> SecKey {
        SecKey(
            .enclave(EnclaveKeyMaterial(publicX963: publicKey, blob: blob, context: context, reason: nil, kind: kind))
        )
    }

    public var description: String {
        let kind: String
        switch material {
        case .ec(let k): kind = "EC \(k.curve.bits)-bit \(k.isPrivate ? "private" : "public")"
        case .rsaPrivate(let k): kind = "RSA \(k.keySizeInBits)-bit private"
        case .rsaPublic(let k): kind = "RSA \(k.keySizeInBits)-bit public"
        case .enclave: kind = "Secure Enclave P-256 private"
        }
        return "<SecKey \(kind) key>"
    }
}

/// A Secure Enclave key on this side of the socket: its public key, the daemon's sealed blob, and
/// the context (and reason) its uses authenticate on.
struct EnclaveKeyMaterial: Sendable {
    let publicX963: Data
    let blob: Data
    let context: (any RequestContext)?
    let reason: String?
    /// SecKey's keys are `general`; a right's key made before rights could decrypt is `signing`.
    var kind: KeyRequest.Kind = .general

    func run(_ request: KeyRequest) throws(SecFailure) -> KeyReply {
        var request = request
        request.blob = blob
        request.kind = kind
        if request.reason == nil { request.reason = reason }
        let reply = ContextRequests.performKeyOperation(request, context: context)
        guard let problem = reply.problem else { return reply }
        let underlying = reply.authenticationError.map {
            NSError(
                domain: "com.apple.LocalAuthentication",
                code: $0.rawValue,
                userInfo: reply.message.map { [NSLocalizedDescriptionKey: $0] } ?? [:]
            )
        }
        throw SecFailure(
            Self.status(problem, reply.authenticationError),
            reply.message ?? "the Secure Enclave key operation failed",
            underlying: underlying
        )
    }

    /// How a daemon refusal reads as an `OSStatus`. Our mapping (Apple's for these cases is not
    /// documented): a cancelled prompt is `errSecUserCanceled`, a forbidden one
    /// `errSecInteractionNotAllowed`, a key invalidated by an enrolment change `errSecInvalidKeyRef`.
    static func status(_ problem: KeyReply.Problem, _ auth: LAErrorCode?) -> OSStatus {
        switch problem {
        case .invalidKey, .invalidated: return errSecInvalidKeyRef
        case .invalidParameter: return errSecParam
        case .notAvailable: return errSecNotAvailable
        case .authentication:
            switch auth {
            case .userCancel?, .appCancel?, .systemCancel?: return errSecUserCanceled
            case .notInteractive?: return errSecInteractionNotAllowed
            default: return errSecAuthFailed
            }
        }
    }
}
