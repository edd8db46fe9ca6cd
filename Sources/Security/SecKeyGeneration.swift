import EnclaveClient
import EnclaveProtocol
import Foundation

/// `SecKeyCreateRandomKey`: reads the parameters, makes the key (here or in laenclaved), and
/// stores it as a key item when it is permanent.
enum SecKeyGeneration {
    static func create(_ parameters: CFDictionary) throws(SecFailure) -> SecKey {
        let top = try SecKeyParameters(parameters)
        let own = try top.dictionary(kSecPrivateKeyAttrs as String) ?? SecKeyParameters(entries: [:])
        // A private-key attribute wins over the same one at the top level.
        func attribute<T>(_ read: (SecKeyParameters) throws(SecFailure) -> T?) throws(SecFailure) -> T? {
            if let mine = try read(own) { return mine }
            return try read(top)
        }
        let type = try top.string("type") ?? ""
        let token = try top.string("tkid")
        let context: (any RequestContext)?
        if let c = top.entries["u_AuthCtx"] ?? own.entries["u_AuthCtx"] {
            guard let rc = c as? any RequestContext else {
                throw SecFailure(errSecParam, "kSecUseAuthenticationContext must be an LAContext")
            }
            context = rc
        } else {
            context = nil
        }
        let accessControl: SecAccessControl?
        if let v = own.entries["accc"] ?? top.entries["accc"] {
            guard let ac = v as? SecAccessControl else {
                throw SecFailure(errSecParam, "kSecAttrAccessControl must be a SecAccessControl")
            }
            accessControl = ac
        } else {
            accessControl = nil
        }

        let key: SecKey
        switch type {
        case "73":  // kSecAttrKeyTypeECSECPrimeRandom (and kSecAttrKeyTypeEC)
            let bits = try top.int("bsiz") ?? 256
            if let token {
                guard token == kSecAttrTokenIDSecureEnclave as String else {
                    throw SecFailure(errSecParam, "kSecAttrTokenID \(token) is not kSecAttrTokenIDSecureEnclave")
                }
                guard bits == 256 else {
                    throw SecFailure(errSecParam, "Secure Enclave keys are 256-bit EC keys, not \(bits)-bit")
                }
                key = try enclaveKey(
                    accessControl,
                    context,
                    try attribute { (p) throws(SecFailure) in try p.string("u_OpPrompt") }
                )
            } else {
                guard let curve = ECKeyMaterial.Curve(bits: bits) else {
                    throw SecFailure(errSecParam, "EC keys are 256, 384 or 521 bits, not \(bits)")
                }
                key = SecKey(.ec(ECKeyMaterial.generate(curve)))
            }
        case "42":  // kSecAttrKeyTypeRSA
            if token != nil { throw SecFailure(errSecParam, "the Secure Enclave makes only EC keys") }
            let bits = try top.int("bsiz") ?? 2048
            guard (1024...4096).contains(bits), bits % 8 == 0 else {
                throw SecFailure(errSecParam, "RSA keys are 1024 to 4096 bits, in steps of 8; not \(bits)")
            }
            do {
                key = SecKey(.rsaPrivate(try .init(unsafeKeySize: .init(bitCount: bits))))
            } catch {
                throw SecFailure(errSecInternalComponent, "RSA key generation failed: \(error)")
            }
        case "":
            throw SecFailure(errSecParam, "kSecAttrKeyType is missing")
        default:
            throw SecFailure(errSecParam, "kSecAttrKeyType \(type) is not supported (EC or RSA)")
        }

        guard try attribute({ (p) throws(SecFailure) in try p.bool("perm") }) == true else { return key }
        var attributes = key.keyAttributes
        attributes["perm"] = .bool(true)
        for name in ["atag", "labl", "agrp"] {
            if let v = own.entries[name] ?? top.entries[name] {
                guard let kv = SecItemMarshaling.value(v) else {
                    throw SecFailure(errSecParam, "unsupported value for \(name)")
                }
                attributes[name] = kv
            }
        }
        // A Secure Enclave key's access control is in its blob; its item only needs the protection class.
        let itemAccess: AccessControlValue?
        if case .enclave = key.material {
            itemAccess = accessControl.map { AccessControlValue(protection: $0.wireValue.protection, flags: []) }
        } else {
            itemAccess = accessControl?.wireValue
        }
        try SecKeyItems.add(key, attributes: attributes, accessControl: itemAccess, context: context)
        return SecKey(key.material, itemAttributes: attributes)
    }

    private static func enclaveKey(
        _ accessControl: SecAccessControl?,
        _ context: (any RequestContext)?,
        _ reason: String?
    ) throws(SecFailure) -> SecKey {
        let request = KeyRequest(
            operation: .create,
            kind: .general,
            accessControl: accessControl?.wireValue,
            context: ""
        )
        let reply = ContextRequests.performKeyOperation(request, context: context)
        if let problem = reply.problem {
            throw SecFailure(
                EnclaveKeyMaterial.status(problem, reply.authenticationError),
                reply.message ?? "the Secure Enclave made no key"
            )
        }
        guard let blob = reply.blob, let publicKey = reply.publicKey else {
            throw SecFailure(errSecInternalComponent, "the Secure Enclave answered no key")
        }
        return SecKey(.enclave(EnclaveKeyMaterial(publicX963: publicKey, blob: blob, context: context, reason: reason)))
    }
}

/// Keys as keychain items (`kSecClassKey`): adding one, and turning a found item back into a key.
enum SecKeyItems {
    static func add(
        _ key: SecKey,
        attributes: [String: KeychainValue],
        accessControl: AccessControlValue?,
        context: (any RequestContext)?
    ) throws(SecFailure) {
        var request = KeychainRequest(attributes: attributes, context: "")
        request.attributes["v_Data"] = .data(key.itemData)
        request.heldKey = key.heldKey
        request.accessControl = accessControl
        let reply = secItemTransport(.add, request, context)
        guard reply.status == .success else {
            throw SecFailure(reply.status.rawValue, reply.message ?? secErrorMessage(reply.status.rawValue))
        }
    }
}
