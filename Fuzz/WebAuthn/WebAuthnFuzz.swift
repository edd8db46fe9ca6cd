// libFuzzer targets for what the login server parses from strangers: CBOR and COSE keys,
// authenticator data and attestation objects, clientDataJSON and the JSON shapes of the API.
// scripts/fuzz-webauthn builds this with -sanitize=fuzzer,address -DFUZZING and runs one target
// (WEBAUTHN_FUZZ_TARGET=cbor|authdata|json); the ordinary build is a replayer that runs every
// target over the files it is given (the committed corpus, a crash libFuzzer wrote).

import Foundation
import FuzzSupport
import TouchLoginAPI
import WebAuthn

enum WebAuthnFuzz {
    enum Target: String, CaseIterable { case cbor, authdata, json }

    static func run(_ target: Target, _ data: Data) {
        switch target {
        case .cbor:
            if let value = try? CBOR.decode(data) {
                // What decodes must encode again to something that decodes to the same value.
                let again = try? CBOR.decode(value.encoded())
                precondition(again == value, "CBOR round trip differs")
            }
            _ = try? CBOR.decodePrefix(data)
            if let key = try? COSEKey(cbor: data) {
                // A key that parses (ES256, EdDSA or RS256) encodes to a key that parses to itself.
                precondition((try? COSEKey(cbor: key.cbor)) == key, "COSE key round trip differs")
            }
        case .authdata:
            _ = try? AuthenticatorData(data)
            // The statement too: an x5c's certificates are parsed (swift-certificates) and checked.
            _ = try? AttestationObject(data).verifyStatement(clientDataHash: Data(count: 32))
        case .json:
            _ = try? CollectedClientData(json: data)
            let decoder = JSONDecoder()
            if let registration = try? decoder.decode(RegistrationRequest.self, from: data) {
                _ = try? registration.credential.decodedRawID
                _ = try? registration.credential.decodedAttestationObject
            }
            if let assertion = try? decoder.decode(AssertionRequest.self, from: data) {
                _ = try? assertion.credential.decodedAuthenticatorData
                _ = try? assertion.credential.decodedSignature
                _ = try? assertion.credential.decodedUserHandle
            }
        }
    }
}

@main
struct WebAuthnFuzzMain {
    static func main() throws {
        try FuzzMain.run(WebAuthnFuzz.Target.self, variable: "WEBAUTHN_FUZZ_TARGET", default: .cbor, WebAuthnFuzz.run)
    }
}
