import Crypto
import Foundation

/// The TPM root's recovery secret (issue 31, item 2): after a TPM clear, a new mainboard or an
/// fTPM reset the sealed blob opens nowhere, and with it the state. Root issues a recovery secret
/// (`laenclaved --issue-tpm-recovery`, the daemon stopped): 32 random bytes, shown once on standard
/// output and never written, key an AES-GCM box around the TPM's secret kept beside the state
/// (`tpm-recovery.blob`); issuing again replaces the box, so only the newest secret opens it (a
/// leaked or lost one is replaced). With it, `laenclaved --recover-tpm-root` seals the same TPM
/// secret to the TPM the machine has now: the master key, and so every item and key, is the same
/// (the key file is still needed too). Without it the box tests nothing: 256 random bits.
///
/// Our choices: never on the disk beside the key file (a copy of both directories would then open
/// the state anywhere, as the software root does), and never in the log; a daemon that sealed a new
/// state at a service's start has no one to show it to, so it says at every start that none was
/// issued until root does.
enum TPMRootRecovery {
    static let blobName = "tpm-recovery.blob"

    /// Issues a recovery secret for `tpmSecret`: `show` gets it (formatted) and must have shown it
    /// before the box takes the place of any before; if `show` throws, the old box stays and the new
    /// secret is gone, so no secret is lost unseen.
    static func issue(tpmSecret: [UInt8], stateDirectory: String, show: (String) throws -> Void) throws {
        let secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let box = try AES.GCM.seal(tpmSecret, using: key(secret), authenticating: context)
        guard let combined = box.combined else {
            throw DaemonError(.rootRecovery, "the recovery box could not be made")
        }
        try Storage.writePrivateFile(combined, to: stateDirectory + "/" + blobName) { try show(format(secret)) }
    }

    /// Whether a recovery secret was issued for the state.
    static func issued(stateDirectory: String) -> Bool {
        FileManager.default.fileExists(atPath: stateDirectory + "/" + blobName)
    }

    /// The TPM's secret, from the state's box and the recovery secret as root typed it.
    static func open(secret typed: String, stateDirectory: String) throws -> [UInt8] {
        guard let secret = parse(typed) else {
            throw DaemonError(.rootRecovery, "a recovery secret is 64 hexadecimal digits (dashes and spaces allowed)")
        }
        let path = stateDirectory + "/" + blobName
        guard let combined = FileManager.default.contents(atPath: path) else {
            throw DaemonError(
                .rootRecovery,
                "\(path) is missing: this state has no recovery box (made before recovery existed?)"
            )
        }
        do {
            let box = try AES.GCM.SealedBox(combined: combined)
            return Array(try AES.GCM.open(box, using: key(secret), authenticating: context))
        } catch {
            throw DaemonError(.rootRecovery, "this recovery secret does not open this state's recovery box")
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
