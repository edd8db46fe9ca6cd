import Foundation
import XCTest

@testable import Security

/// SecKey's output checked by an independent implementation (Python's `cryptography`, OpenSSL
/// underneath), and its input made by it: signatures, ECIES in Apple's framing, ECDH with the
/// X9.63 KDF, RSA-PSS and OAEP. The python is scripts/setup-interop's ($INTEROP_PYTHON).
final class SecKeyInteropTests: XCTestCase {
    private func python() throws -> String {
        let env = ProcessInfo.processInfo.environment
        guard let python = env["INTEROP_PYTHON"] ?? env["TOUCHLOGIN_INTEROP_PYTHON"],
            FileManager.default.isExecutableFile(atPath: python)
        else {
            throw XCTSkip("INTEROP_PYTHON is not set (bash scripts/test sets it from scripts/setup-interop)")
        }
        return python
    }

    /// Runs the checker with `request` (hex strings) and answers its JSON.
    private func check(_ request: [String: String]) throws -> [String: String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try python())
        process.arguments = ["-c", Self.checker]
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: request))
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, String(decoding: err, as: UTF8.self))
        return (try JSONSerialization.jsonObject(with: out) as? [String: String]) ?? [:]
    }

    private func key(_ type: CFString, _ bits: Int) throws -> SecKey {
        var error: Unmanaged<CFError>?
        guard
            let key = SecKeyCreateRandomKey(
                [kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits] as CFDictionary,
                &error
            )
        else {
            throw error!.takeRetainedValue() as Error
        }
        return key
    }

    private func external(_ key: SecKey) -> String { (SecKeyCopyExternalRepresentation(key, nil)! as Data).hex }

    func testOurECDSASignaturesVerifyThere() throws {
        for (bits, algorithm, hash, format) in [
            (256, SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256, "sha256", "der"),
            (384, .ecdsaSignatureMessageX962SHA384, "sha384", "der"),
            (521, .ecdsaSignatureMessageRFC4754SHA512, "sha512", "raw"),
            (256, .ecdsaSignatureMessageX962SHA1, "sha1", "der"),
        ] {
            let k = try key(kSecAttrKeyTypeECSECPrimeRandom, bits)
            let message = Data("interop \(bits)".utf8)
            let signature = SecKeyCreateSignature(k, algorithm, message as CFData, nil)! as Data
            let answer = try check([
                "op": "ecdsa-verify", "public": external(SecKeyCopyPublicKey(k)!), "message": message.hex,
                "signature": signature.hex, "hash": hash, "format": format,
            ])
            XCTAssertEqual(answer["valid"], "yes", "\(bits) \(algorithm.rawValue)")
        }
    }

    func testECIESBothWays() throws {
        for (bits, algorithm, hash, variableIV) in [
            (256, SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM, "sha256", "yes"),
            (256, .eciesEncryptionStandardX963SHA256AESGCM, "sha256", "no"),
            (384, .eciesEncryptionStandardVariableIVX963SHA384AESGCM, "sha384", "yes"),
        ] {
            let k = try key(kSecAttrKeyTypeECSECPrimeRandom, bits)
            let plaintext = Data("ecies \(algorithm.rawValue)".utf8)
            let ours = SecKeyCreateEncryptedData(SecKeyCopyPublicKey(k)!, algorithm, plaintext as CFData, nil)! as Data
            let opened = try check([
                "op": "ecies-decrypt", "private": external(k), "ciphertext": ours.hex, "hash": hash,
                "variableIV": variableIV,
            ])
            XCTAssertEqual(opened["plaintext"], plaintext.hex, algorithm.rawValue)

            let theirs = try check([
                "op": "ecies-encrypt", "public": external(SecKeyCopyPublicKey(k)!), "plaintext": plaintext.hex,
                "hash": hash, "variableIV": variableIV,
            ])
            let ciphertext = try XCTUnwrap(theirs["ciphertext"].flatMap(Data.init(hex:)))
            var error: Unmanaged<CFError>?
            XCTAssertEqual(
                SecKeyCreateDecryptedData(k, algorithm, ciphertext as CFData, &error) as Data?,
                plaintext,
                algorithm.rawValue
            )
        }
    }

    func testECDHWithTheX963KDFMatches() throws {
        let k = try key(kSecAttrKeyTypeECSECPrimeRandom, 256)
        let theirs = try check(["op": "ec-generate", "curve": "256"])
        let peer = try XCTUnwrap(
            SecKeyCreateWithData(
                Data(hex: theirs["public"]!)! as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic]
                    as CFDictionary,
                nil
            )
        )
        let info = Data("shared info".utf8)
        let params: [String: Any] = [
            kSecKeyKeyExchangeParameterRequestedSize as String: 42,
            kSecKeyKeyExchangeParameterSharedInfo as String: info,
        ]
        let ours =
            SecKeyCopyKeyExchangeResult(k, .ecdhKeyExchangeStandardX963SHA256, peer, params as CFDictionary, nil)!
            as Data
        let answer = try check([
            "op": "ecdh-x963", "private": theirs["private"]!, "peer": external(SecKeyCopyPublicKey(k)!),
            "sharedInfo": info.hex, "size": "42", "hash": "sha256",
        ])
        XCTAssertEqual(answer["derived"], ours.hex)
    }

    func testRSAPSSAndOAEP() throws {
        let k = try key(kSecAttrKeyTypeRSA, 2048)
        let message = Data("rsa interop".utf8)
        let signature = SecKeyCreateSignature(k, .rsaSignatureMessagePSSSHA256, message as CFData, nil)! as Data
        let verified = try check([
            "op": "rsa-pss-verify", "public": external(SecKeyCopyPublicKey(k)!), "message": message.hex,
            "signature": signature.hex,
        ])
        XCTAssertEqual(verified["valid"], "yes")
        let encrypted = try check([
            "op": "rsa-oaep-encrypt", "public": external(SecKeyCopyPublicKey(k)!), "plaintext": message.hex,
        ])
        let ciphertext = try XCTUnwrap(encrypted["ciphertext"].flatMap(Data.init(hex:)))
        XCTAssertEqual(
            SecKeyCreateDecryptedData(k, .rsaEncryptionOAEPSHA256, ciphertext as CFData, nil) as Data?,
            message
        )

        // Apple's RSA key wrapping: OAEP-wrapped AES key, then AES-GCM over the public key.
        let wrapped =
            SecKeyCreateEncryptedData(SecKeyCopyPublicKey(k)!, .rsaEncryptionOAEPSHA256AESGCM, message as CFData, nil)!
            as Data
        let unwrapped = try check([
            "op": "rsa-wrap-decrypt", "private": external(k), "public": external(SecKeyCopyPublicKey(k)!),
            "ciphertext": wrapped.hex,
        ])
        XCTAssertEqual(unwrapped["plaintext"], message.hex)
    }

    /// The other side. Apple's ECIES framing as Security's SecKeyAdaptors.m makes it: ephemeral
    /// X9.63 point, AES-GCM ciphertext, 16-byte tag; X9.63 KDF over the ephemeral point; a 16-byte
    /// AES key up to 256-bit curves (32 above), then a 16-byte IV for the variable-IV algorithms
    /// (zeros otherwise).
    private static let checker = #"""
        import base64, json, sys
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
        from cryptography.hazmat.primitives.kdf.x963kdf import X963KDF
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.exceptions import InvalidSignature

        req = json.load(sys.stdin)
        H = {"sha1": hashes.SHA1, "sha256": hashes.SHA256, "sha384": hashes.SHA384, "sha512": hashes.SHA512}
        CURVES = {32: ec.SECP256R1(), 48: ec.SECP384R1(), 66: ec.SECP521R1()}
        def curve_of(point): return CURVES[(len(point) - 1) // 2]
        def public_ec(hexpoint):
            p = bytes.fromhex(hexpoint)
            return ec.EllipticCurvePublicKey.from_encoded_point(curve_of(p), p)
        def private_ec(hexdata):
            d = bytes.fromhex(hexdata); n = (len(d) - 1) // 3
            return ec.derive_private_key(int.from_bytes(d[1 + 2 * n:], "big"), CURVES[n])
        def kdf(secret, hash, info, size): return X963KDF(algorithm=H[hash](), length=size, sharedinfo=info).derive(secret)
        def rsa_public(hexder):
            # Apple's external representation of an RSA public key is PKCS#1 (RSAPublicKey), PEM's "RSA PUBLIC KEY".
            pem = b"-----BEGIN RSA PUBLIC KEY-----\n" + base64.encodebytes(bytes.fromhex(hexder)) + b"-----END RSA PUBLIC KEY-----\n"
            return serialization.load_pem_public_key(pem)
        def sizes(point_len, variable):
            key = 16 if (point_len - 1) // 2 <= 32 else 32
            return key, key + (16 if variable else 0)
        out = {}
        op = req["op"]
        if op == "ecdsa-verify":
            key = public_ec(req["public"]); sig = bytes.fromhex(req["signature"])
            if req["format"] == "raw":
                n = len(sig) // 2
                sig = utils.encode_dss_signature(int.from_bytes(sig[:n], "big"), int.from_bytes(sig[n:], "big"))
            try:
                key.verify(sig, bytes.fromhex(req["message"]), ec.ECDSA(H[req["hash"]]())); out["valid"] = "yes"
            except InvalidSignature:
                out["valid"] = "no"
        elif op == "ecies-decrypt":
            key = private_ec(req["private"]); data = bytes.fromhex(req["ciphertext"])
            n = key.curve.key_size; plen = 1 + 2 * ((n + 7) // 8)
            eph = data[:plen]; body = data[plen:]
            secret = key.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(key.curve, eph))
            klen, total = sizes(plen, req["variableIV"] == "yes")
            derived = kdf(secret, req["hash"], eph, total)
            iv = derived[klen:] if req["variableIV"] == "yes" else bytes(16)
            out["plaintext"] = AESGCM(derived[:klen]).decrypt(iv, body, None).hex()
        elif op == "ecies-encrypt":
            recipient = public_ec(req["public"])
            eph = ec.generate_private_key(recipient.curve)
            point = eph.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            secret = eph.exchange(ec.ECDH(), recipient)
            klen, total = sizes(len(point), req["variableIV"] == "yes")
            derived = kdf(secret, req["hash"], point, total)
            iv = derived[klen:] if req["variableIV"] == "yes" else bytes(16)
            out["ciphertext"] = (point + AESGCM(derived[:klen]).encrypt(iv, bytes.fromhex(req["plaintext"]), None)).hex()
        elif op == "ec-generate":
            curve = {"256": ec.SECP256R1(), "384": ec.SECP384R1(), "521": ec.SECP521R1()}[req["curve"]]
            k = ec.generate_private_key(curve); n = (curve.key_size + 7) // 8
            point = k.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            out["public"] = point.hex(); out["private"] = (point + k.private_numbers().private_value.to_bytes(n, "big")).hex()
        elif op == "ecdh-x963":
            secret = private_ec(req["private"]).exchange(ec.ECDH(), public_ec(req["peer"]))
            out["derived"] = kdf(secret, req["hash"], bytes.fromhex(req["sharedInfo"]), int(req["size"])).hex()
        elif op == "rsa-pss-verify":
            try:
                rsa_public(req["public"]).verify(bytes.fromhex(req["signature"]), bytes.fromhex(req["message"]),
                                                 padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32), hashes.SHA256())
                out["valid"] = "yes"
            except InvalidSignature:
                out["valid"] = "no"
        elif op == "rsa-oaep-encrypt":
            out["ciphertext"] = rsa_public(req["public"]).encrypt(bytes.fromhex(req["plaintext"]),
                                                                  padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)).hex()
        elif op == "rsa-wrap-decrypt":
            pem = b"-----BEGIN RSA PRIVATE KEY-----\n" + base64.encodebytes(bytes.fromhex(req["private"])) + b"-----END RSA PRIVATE KEY-----\n"
            key = serialization.load_pem_private_key(pem, password=None)
            data = bytes.fromhex(req["ciphertext"]); n = key.key_size // 8
            session = key.decrypt(data[:n], padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None))
            out["plaintext"] = AESGCM(session).decrypt(bytes(16), data[n:], bytes.fromhex(req["public"])).hex()
        json.dump(out, sys.stdout)
        """#
}

extension Data {
    var hex: String { map { String(format: "%02x", $0) }.joined() }

    init?(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}
