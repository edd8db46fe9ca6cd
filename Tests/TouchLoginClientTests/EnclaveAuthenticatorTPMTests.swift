import Foundation
import TouchLoginAPI
import WebAuthn
import XCTest

@testable import TouchLoginClient

/// When a failed TPM attestation may still end in a `packed` registration: only where the server
/// takes `packed` too, and never after this TPM refused the server's credential (a challenge made
/// for another TPM) or where this machine has no TPM for a server that takes only `tpm`.
final class EnclaveAuthenticatorTPMTests: XCTestCase {
    func testAPackedRegistrationFollowsAFailedTPMStepOnlyWhereItIsHarmless() {
        func options(_ formats: [String]?) -> PublicKeyCredentialCreationOptionsJSON {
            var o = PublicKeyCredentialCreationOptionsJSON(
                rp: .init(id: "localhost", name: "t"),
                user: .init(id: "dQ", name: "u", displayName: "u"),
                challenge: "AA"
            )
            o.attestation = "direct"
            o.attestationFormats = formats
            return o
        }
        let rows: [(String, any Error, [String]?, Bool)] = [
            ("a maker the server does not trust", APIError(.attestationUntrusted, "no"), ["tpm", "packed"], true),
            ("the network", APIError(.unavailable, "down"), ["tpm", "packed"], true),
            (
                "a credential this TPM could not open", ClientError(.tpmCredentialRefused, "x"), ["tpm", "packed"],
                false
            ),
            ("no TPM where only tpm is taken", ClientError(.tpmAttestationUnavailable, "x"), ["tpm"], false),
            ("a server that takes tpm only", APIError(.attestationUntrusted, "no"), ["tpm"], false),
        ]
        for (what, error, formats, expected) in rows {
            XCTAssertEqual(
                EnclaveAuthenticator.mayRegisterPacked(after: error, options: options(formats)),
                expected,
                what
            )
        }
    }
}
