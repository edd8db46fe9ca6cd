import ArgumentParser
import EnclaveProtocol
import Foundation

struct AttestationRoot: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attestation-root",
        abstract: "Print this daemon's attestation root certificate (PEM), for servers that check laenclaved keys.",
        discussion: """
            Every Secure Enclave key this daemon makes can be attested: a certificate chain to this root \
            states the key's access control and the daemon's mode and sensor. Hand the root to a server \
            (touchlogin-server --require-attestation FILE); several roots may share one file. Made once \
            per state directory: it stays the same across restarts and upgrades.
            """
    )
    @OptionGroup var client: ClientOptions

    func run() throws {
        guard
            case .key(let reply) = try client.call(
                .key(KeyRequest(operation: .attestationRoot, kind: .signing, context: UUID().uuidString))
            )
        else {
            printError("lactl: the daemon answered something else")
            throw ExitCode(ExitStatus.refused)
        }
        guard reply.problem == nil, let root = reply.certificates?.first else {
            printError("lactl: \(reply.message ?? "the daemon answered no attestation root")")
            throw ExitCode(ExitStatus.refused)
        }
        // RFC 7468 lets explanatory text precede the certificate: which machine it is, for the
        // administrator (the certificate itself names none).
        if let label = reply.message { print("laenclaved attestation root of \(Printable.field(label))") }
        print(Self.pem(root), terminator: "")
    }

    /// RFC 7468's textual encoding: base64 in lines of 64.
    static func pem(_ der: Data) -> String {
        "-----BEGIN CERTIFICATE-----\n"
            + der.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
            + "\n-----END CERTIFICATE-----\n"
    }
}
