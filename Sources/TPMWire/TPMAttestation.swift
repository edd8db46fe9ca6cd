import Foundation

/// What a TPM states about one of its keys (TPMS_ATTEST of type TPM_ST_ATTEST_CERTIFY, made by
/// TPM2_Certify and signed by an attestation key): that the object named `certifiedName` is loaded
/// in it, with the caller's `extraData` (WebAuthn: a hash of the authenticator data and the
/// client data) bound in. Only a TPM writes the magic value: a restricted key refuses to sign any
/// message that begins with it unless the TPM made the message itself.
public struct TPMCertifyStatement: Sendable, Equatable {
    /// TPM_GENERATED_VALUE.
    public static let generatedMagic: UInt32 = 0xFF54_4347
    /// TPM_ST_ATTEST_CERTIFY.
    public static let certifyType: UInt16 = 0x8017

    public let bytes: [UInt8]
    public let qualifiedSigner: [UInt8]
    public let extraData: [UInt8]
    public let clock: UInt64
    public let resetCount: UInt32
    public let restartCount: UInt32
    public let safe: Bool
    public let firmwareVersion: UInt64
    public let certifiedName: [UInt8]
    public let certifiedQualifiedName: [UInt8]

    public init<Bytes: Sequence>(_ marshalled: Bytes) throws(TPMWireError) where Bytes.Element == UInt8 {
        bytes = Array(marshalled)
        var reader = TPMReader(bytes)
        guard try reader.uint32() == Self.generatedMagic else { throw .unsupported("a statement the TPM did not make") }
        guard try reader.uint16() == Self.certifyType else { throw .unsupported("a statement other than certify") }
        qualifiedSigner = try reader.sized()
        extraData = try reader.sized()
        clock = try reader.uint64()
        resetCount = try reader.uint32()
        restartCount = try reader.uint32()
        safe = try reader.uint8() != 0
        firmwareVersion = try reader.uint64()
        certifiedName = try reader.sized()
        certifiedQualifiedName = try reader.sized()
        try reader.expectEnd()
    }
}
