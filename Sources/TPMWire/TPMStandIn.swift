import Foundation

/// What a TPM marshals, made without one: the public area of a P-256 key and a certify statement.
/// For software stand-ins of a TPM (tests of the verifiers that read these, and simulators); a
/// statement made here is signed by whatever key the caller holds, which is exactly what a
/// verifier must not take on trust — only an attestation key a CA certified makes it a TPM's.
public enum TPMStandIn {
    /// TPMT_PUBLIC of a P-256 key (SHA-256 names): an endorsement key's (AES-128-CFB, no scheme) when
    /// `endorsement`, else a signing key's (ECDSA-SHA256). `x963`: the uncompressed point.
    public static func publicArea(
        x963: some Collection<UInt8>,
        attributes: TPMPublicArea.Attributes,
        endorsement: Bool = false
    ) -> [UInt8] {
        let point = Array(x963.dropFirst())
        var writer = TPMWriter()
        writer.uint16(TPMPublicArea.eccType)
        writer.uint16(TPMHash.sha256.rawValue)
        writer.uint32(attributes.rawValue)
        writer.sized([UInt8]())
        if endorsement {
            for value in [TPMPublicArea.aes, 128, TPMPublicArea.cfb, TPMPublicArea.nullAlgorithm] {
                writer.uint16(value)
            }
        } else {
            for value in [TPMPublicArea.nullAlgorithm, TPMPublicArea.ecdsa, TPMHash.sha256.rawValue] {
                writer.uint16(value)
            }
        }
        writer.uint16(TPMCurve.p256.rawValue)
        writer.uint16(TPMPublicArea.nullAlgorithm)
        writer.sized(point.prefix(32))
        writer.sized(point.suffix(32))
        return writer.bytes
    }

    /// TPMS_ATTEST of TPM2_Certify naming `certifiedName` with `extraData` bound in; `magic` other
    /// than TPM_GENERATED_VALUE makes a statement no TPM would.
    public static func certifyStatement(
        extraData: some Collection<UInt8>,
        certifiedName: [UInt8],
        magic: UInt32 = TPMCertifyStatement.generatedMagic
    ) -> [UInt8] {
        var writer = TPMWriter()
        writer.uint32(magic)
        writer.uint16(TPMCertifyStatement.certifyType)
        writer.sized([0x00, 0x0B] + [UInt8](repeating: 0, count: 32))
        writer.sized(extraData)
        writer.raw([UInt8](repeating: 0, count: 8 + 4 + 4))  // clock, reset and restart counts
        writer.raw([1])  // safe
        writer.raw([UInt8](repeating: 0, count: 8))  // firmware version
        writer.sized(certifiedName)
        writer.sized(certifiedName)
        return writer.bytes
    }
}
