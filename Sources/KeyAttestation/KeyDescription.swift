import EnclaveProtocol
import SwiftASN1

/// What laenclaved states about a key it attests: how the key is protected and what kind of
/// daemon holds it. Carried in the key's certificate under `KeyDescription.extensionID`, as DER:
///
///     LaenclavedKeyDescription ::= SEQUENCE {
///         version             INTEGER (1),
///         daemonMode          UTF8String,  -- "system" or "user"
///         sensor              UTF8String,  -- "fprintd", "simulated", or "none"
///         simulationAllowed   BOOLEAN,     -- scripted touches or typed passcodes are accepted
///         keyKind             UTF8String,  -- "signing", "keyAgreement" or "general"
///         protection          UTF8String,  -- Apple's kSecAttrAccessible… raw value, e.g. "akpu"
///         accessControlFlags  INTEGER      -- SecAccessControlCreateFlags, Apple's raw values
///     }
///
/// Our own format (Apple attests Secure Enclave keys only through App Attest): a server reads it
/// with `KeyDescription(certificateExtension:)` once the certificate chains to a root it trusts.
public struct KeyDescription: Equatable, Sendable {
    public enum Sensor: String, Sendable, CaseIterable {
        /// A real reader through fprintd.
        case fprintd
        /// The simulated sensor (tests, demos): touches are scripted.
        case simulated
        /// No biometric sensor: only the passcode.
        case none
    }

    public static let version = 1
    public static let extensionID = ASN1ObjectIdentifier(arrayLiteral: 2, 25, 7_681_360_128_379_538_199, 1)

    public var daemonMode: DaemonMode
    public var sensor: Sensor
    public var simulationAllowed: Bool
    public var keyKind: KeyRequest.Kind
    public var protection: Protection
    public var accessControl: AccessControlFlags

    public init(
        daemonMode: DaemonMode,
        sensor: Sensor,
        simulationAllowed: Bool,
        keyKind: KeyRequest.Kind,
        protection: Protection,
        accessControl: AccessControlFlags
    ) {
        self.daemonMode = daemonMode
        self.sensor = sensor
        self.simulationAllowed = simulationAllowed
        self.keyKind = keyKind
        self.protection = protection
        self.accessControl = accessControl
    }

    /// Whether using the key needs an authentication of the user on the request's context: a
    /// biometric match, the passcode or either (`privateKeyUsage` with at least one constraint).
    /// What makes an authenticator's UV flag true. (A context that authenticated moments before,
    /// or has a reuse duration, signs without a new touch, as on Apple's Secure Enclave.)
    public var needsUserAuthentication: Bool {
        accessControl.contains(.privateKeyUsage)
            && !accessControl.intersection([.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode]).isEmpty
    }

    /// "system daemon, fprintd, biometryCurrentSet,privateKeyUsage (akpu)": for logs and device lists.
    public var summary: String {
        "\(daemonMode.rawValue) daemon, \(sensor.rawValue)\(simulationAllowed ? " (simulation allowed)" : ""), \(accessControl.names) (\(protection.rawValue))"
    }
}

extension KeyDescription: DERImplicitlyTaggable {
    public static var defaultIdentifier: ASN1Identifier { .sequence }

    public init(derEncoded rootNode: ASN1Node, withIdentifier identifier: ASN1Identifier) throws {
        self = try DER.sequence(rootNode, identifier: identifier) { nodes in
            let version = try Int(derEncoded: &nodes)
            guard version == Self.version else {
                throw ASN1Error.invalidASN1Object(reason: "key description version \(version)")
            }
            func word<T: RawRepresentable<String>>(_: T.Type, _ nodes: inout ASN1NodeCollection.Iterator) throws -> T {
                let text = String(try ASN1UTF8String(derEncoded: &nodes))
                guard let value = T(rawValue: text) else {
                    throw ASN1Error.invalidASN1Object(reason: "unknown value \(text)")
                }
                return value
            }
            let mode = try word(DaemonMode.self, &nodes)
            let sensor = try word(Sensor.self, &nodes)
            let simulation = try Bool(derEncoded: &nodes)
            let kind = try word(KeyRequest.Kind.self, &nodes)
            let protection = try word(Protection.self, &nodes)
            let flags = AccessControlFlags(rawValue: try UInt64(derEncoded: &nodes))
            return KeyDescription(
                daemonMode: mode,
                sensor: sensor,
                simulationAllowed: simulation,
                keyKind: kind,
                protection: protection,
                accessControl: flags
            )
        }
    }

    public func serialize(into coder: inout DER.Serializer, withIdentifier identifier: ASN1Identifier) throws {
        try coder.appendConstructedNode(identifier: identifier) { coder in
            try coder.serialize(Self.version)
            try coder.serialize(ASN1UTF8String(daemonMode.rawValue))
            try coder.serialize(ASN1UTF8String(sensor.rawValue))
            try coder.serialize(simulationAllowed)
            try coder.serialize(ASN1UTF8String(keyKind.rawValue))
            try coder.serialize(ASN1UTF8String(protection.rawValue))
            try coder.serialize(accessControl.rawValue)
        }
    }

    /// The DER bytes, as the certificate extension's value.
    public func derBytes() throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(self)
        return serializer.serializedBytes
    }

    public init(derBytes: some Collection<UInt8>) throws {
        self = try KeyDescription(derEncoded: Array(derBytes)[...])
    }
}
