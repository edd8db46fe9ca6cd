import Crypto
import Foundation

/// The TPM root's recovery secret (issue 31, item 2): after a TPM clear, a new mainboard or an
/// fTPM reset the sealed blob opens nowhere, and with it the state. When the TPM root is set up,
/// 32 random bytes — the recovery secret — key an AES-GCM box around the TPM's secret, kept beside
/// the state (`tpm-recovery.blob`); the secret itself is written once, for root to take off the
/// machine, to a file beside the key file (0600). With it, `laenclaved --recover-tpm-root` seals the
/// same TPM secret to the TPM the machine has now: the master key, and so every item and key, is
/// the same (the key file is still needed too). Without it the box tests nothing: the secret is
/// 256 random bits, not a passcode.
///
/// Our choices: a daemon set up at a service's start has no terminal to show the secret on, so it
/// is written to a file only the daemon's user reads, and the log says where at every start while
/// it is there (as `systemd-cryptenroll --recovery-key` shows it once, to whoever ran it).
enum TPMRootRecovery {
    static let blobName = "tpm-recovery.blob"

    /// Where the secret is written when the TPM root is set up: beside the key file.
    static func secretPath(keyFile: String) -> String {
        (keyFile as NSString).deletingLastPathComponent + "/tpm-recovery-secret"
    }

    struct RecoveryError: Error, CustomStringConvertible {
        let description: String
    }

    /// Sets up recovery for `tpmSecret`: the box beside the state, the secret beside the key file.
    /// Returns where the secret is.
    static func make(tpmSecret: [UInt8], stateDirectory: String, keyFile: String) throws -> String {
        let secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let box = try AES.GCM.seal(tpmSecret, using: key(secret), authenticating: context)
        guard let combined = box.combined else {
            throw RecoveryError(description: "the recovery box could not be made")
        }
        try Storage.writePrivateFile(combined, to: stateDirectory + "/" + blobName)
        let path = secretPath(keyFile: keyFile)
        try Storage.writePrivateFile(Data((format(secret) + "\n").utf8), to: path)
        return path
    }

    /// The TPM's secret, from the state's box and the recovery secret as root typed it.
    static func open(secret typed: String, stateDirectory: String) throws -> [UInt8] {
        guard let secret = parse(typed) else {
            throw RecoveryError(description: "a recovery secret is 64 hexadecimal digits (dashes and spaces allowed)")
        }
        let path = stateDirectory + "/" + blobName
        guard let combined = FileManager.default.contents(atPath: path) else {
            throw RecoveryError(
                description: "\(path) is missing: this state has no recovery box (made before recovery existed?)"
            )
        }
        do {
            let box = try AES.GCM.SealedBox(combined: combined)
            return Array(try AES.GCM.open(box, using: key(secret), authenticating: context))
        } catch {
            throw RecoveryError(description: "this recovery secret does not open this state's recovery box")
        }
    }

    /// 16 groups of 4 hexadecimal digits.
    static func format(_ bytes: [UInt8]) -> String {
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        return stride(from: 0, to: hex.count, by: 4).map { offset in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return String(hex[start..<hex.index(start, offsetBy: 4)])
        }.joined(separator: "-")
    }

    static func parse(_ text: String) -> [UInt8]? {
        let digits = text.lowercased().filter { !"- \n\t".contains($0) }
        guard digits.count == 64, digits.allSatisfy(\.isHexDigit) else { return nil }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }

    private static let context = Data("laenclaved TPM root recovery v1".utf8)

    private static func key(_ secret: [UInt8]) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret),
            info: Data("laenclaved TPM root recovery".utf8),
            outputByteCount: 32
        )
    }
}
