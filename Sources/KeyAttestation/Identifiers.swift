import Foundation
import SwiftASN1

/// The names laenclaved's attestation is known by.
public enum LaenclavedAttestation {
    /// laenclaved's AAGUID (df28713a-12ba-40ca-8003-eca26f10f554): in the attested credential data
    /// of every key it attests and in each key certificate's FIDO AAGUID extension, so a relying
    /// party can tell laenclaved from any other authenticator model.
    public static let aaguid = Data([
        0xdf, 0x28, 0x71, 0x3a, 0x12, 0xba, 0x40, 0xca, 0x80, 0x03, 0xec, 0xa2, 0x6f, 0x10, 0xf5, 0x54,
    ])

    /// FIDO's id-fido-gen-ce-aaguid (1.3.6.1.4.1.45724.1.1.4): an OCTET STRING holding the AAGUID,
    /// which WebAuthn §8.2.1 compares with the attested credential data's.
    public static let fidoAAGUIDExtensionID: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]

    /// The organizational unit WebAuthn §8.2.1 requires in a packed attestation certificate.
    public static let attestationUnit = "Authenticator Attestation"

    /// Our extensions' arc. 2.25 is the registration-free arc (ITU-T X.667) for a UUID read as an
    /// integer; this one's first 64 bits are zero so that every component fits the 64-bit arcs
    /// ASN.1 libraries take. .1: a key's description (`KeyDescription`); .2: the daemon mode in
    /// the attestation key's certificate (`AttestationAuthority.daemonMode(of:)`).
    public static let daemonModeExtensionID = ASN1ObjectIdentifier(arrayLiteral: 2, 25, 7_681_360_128_379_538_199, 2)
}
