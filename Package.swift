// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "LocalAuthenticationLinux",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "Security", targets: ["Security"]),
        .library(name: "CryptoKit", targets: ["CryptoKit"]),
        .library(name: "LocalAuthenticationTesting", targets: ["LocalAuthenticationTesting"]),
        .library(name: "WebAuthn", targets: ["WebAuthn"]),
        .executable(name: "touchlogin-server", targets: ["touchlogin-server"]),
        .executable(name: "touchlogin", targets: ["touchlogin"]),
        .executable(name: "laenclaved", targets: ["laenclaved"]),
        .executable(name: "lactl", targets: ["lactl"]),
        .executable(name: "laenclaved-agent", targets: ["laenclaved-agent"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // Exact: the ordering edge on the Security target (below) holds for a build of X509 from
        // scratch; an update of it or of what it builds on (swift-asn1, swift-crypto) is followed
        // by removing the build folders (README, after the two commands).
        .package(url: "https://github.com/apple/swift-certificates.git", exact: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // TLS to PostgreSQL (postgres-nio builds it already).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // The wire: framing, message types, limits. Shared by both sides; no other module knows bytes.
        .target(name: "EnclaveProtocol"),
        // The rules, no I/O: attempts, lockout, passcode delays, evaluation flow, domain state.
        .target(
            name: "EnclaveCore",
            dependencies: [
                "EnclaveProtocol",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // laenclaved's key attestation: the certificates the daemon issues for its keys (a per-machine
        // authority) and the key description they carry, read back by servers that trust that root.
        .target(
            name: "KeyAttestation",
            dependencies: [
                "EnclaveProtocol",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The TPM's own structures read and written without a TPM (public areas, certify statements)
        // and TPM2_MakeCredential done where there is none: what a server checks a TPM's attestation
        // with, and what the daemon's tests check the TPM's answers against.
        .target(
            name: "TPMWire",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The client side of the socket: connection, request/response matching, daemon auto-start.
        // Deliberately light: Foundation and Glibc only.
        .target(name: "EnclaveClient", dependencies: ["EnclaveProtocol", "CPeerSocket"]),
        // Apple's keychain API: SecItem calls, kSec constants, SecAccessControl, SecKey, OSStatus. Below
        // LocalAuthentication, as on Apple platforms: it sees an LAContext only as a request context.
        .target(
            name: "Security",
            dependencies: [
                "EnclaveClient", "EnclaveProtocol",
                // Not used here: an ordering edge. swift-certificates' X509 says `#if canImport(Security)
                // import Security` (for Apple's SecCertificate), and on Linux this module would be found
                // if it were built first; depending on X509 makes it build first, without seeing us.
                // X509 rebuilt in a build folder that already holds this module (a dependency update, a
                // new toolchain, other flags) fails with "missing required module": remove the folder.
                // The cost: apps link X509 and SwiftASN1 too.
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Apple's LocalAuthentication; `import LocalAuthentication` brings Security with it, as Apple's does.
        .target(name: "LocalAuthentication", dependencies: ["Security", "EnclaveClient", "EnclaveProtocol"]),
        // CryptoKit's names on Linux: swift-crypto re-exported, plus SecureEnclave keys held by laenclaved.
        .target(
            name: "CryptoKit",
            dependencies: [
                "Security", "LocalAuthentication", "EnclaveClient", "EnclaveProtocol",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // libsystemd's sd-bus (Debian: libsystemd-dev), for the fprintd sensor.
        .systemLibrary(name: "CSdBus", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // Linux-PAM (Debian: libpam0g-dev), for the login password as the device passcode.
        .systemLibrary(name: "CPAM", providers: [.apt(["libpam0g-dev"])]),
        // SO_PEERPIDFD and sock_diag's view of Unix sockets (headers only: Debian's linux-libc-dev).
        .systemLibrary(name: "CPeerSocket"),
        // The TPM 2.0 commands of the hardware root, over tpm2-tss's ESAPI (Debian: libtss2-dev).
        .target(
            name: "CTPM",
            linkerSettings: [
                .linkedLibrary("tss2-esys"), .linkedLibrary("tss2-sys"), .linkedLibrary("tss2-tctildr"),
                .linkedLibrary("tss2-mu"), .linkedLibrary("tss2-rc"),
            ]
        ),
        // The daemon's I/O shell: socket server, peer credentials, storage, sensors, audit.
        // Durable SQLite (every commit synced, read back; group commit), for the daemon and the login server.
        .target(name: "DurableSQLite", dependencies: [.product(name: "GRDB", package: "GRDB.swift")]),
        // Blocking work (scrypt, PAM) on bounded thread pools: the daemon's and the login server's.
        .target(name: "BlockingPool", dependencies: [.product(name: "NIOPosix", package: "swift-nio")]),
        .target(
            name: "EnclaveServer",
            dependencies: [
                "EnclaveCore", "EnclaveProtocol", "KeyAttestation", "CSdBus", "CPAM", "CPeerSocket", "CTPM", "TPMWire",
                "DurableSQLite", "BlockingPool",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "laenclaved",
            dependencies: [
                "EnclaveServer", "EnclaveCore", "EnclaveProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // GTK 4 (Debian: libgtk-4-dev) for the prompt agent's window, seen only by CPromptWindow.
        .systemLibrary(name: "CGtk", pkgConfig: "gtk4", providers: [.apt(["libgtk-4-dev"])]),
        .target(name: "CPromptWindow", dependencies: ["CGtk"]),
        // The graphical prompt agent: draws the daemon's prompts in the person's session.
        .executableTarget(
            name: "laenclaved-agent",
            dependencies: [
                "CPromptWindow", "EnclaveClient", "EnclaveProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The kit app developers use in their own tests: an isolated daemon with a simulated sensor.
        .target(
            name: "LocalAuthenticationTesting",
            dependencies: ["EnclaveClient", "EnclaveProtocol", "LocalAuthentication"]
        ),
        .executableTarget(
            name: "lactl",
            dependencies: [
                "EnclaveClient", "EnclaveCore", "EnclaveProtocol", "LocalAuthentication", "LocalAuthenticationTesting",
                "CPeerSocket", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "la-bench",
            dependencies: [
                "EnclaveClient", "EnclaveProtocol", "EnclaveCore", "LocalAuthentication", "Security",
                "LocalAuthenticationTesting",
                // The daemon's socket shell without the daemon, as a floor beside the raw pair (`NIOSocketEcho`).
                "EnclaveServer", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // Reads the state's generation: how often the TPM's counter moved (`TPMRootBench`).
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // WebAuthn Level 3 server-side verification (ES256, EdDSA, RS256), strict CBOR/COSE, and the
        // encoding a software platform authenticator needs. Foundation, swift-crypto, and
        // swift-certificates for packed attestation's certificates.
        // Packed attestation with a certificate chain is checked here (the statement); whom to trust is
        // the relying party's.
        .target(
            name: "WebAuthn",
            dependencies: [
                "TPMWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // The login pair's HTTP API bodies, shared by server and client.
        .target(name: "TouchLoginAPI", dependencies: ["WebAuthn"]),
        // The login server: rules (LoginService), storage (LoginStore: SQLite or PostgreSQL), HTTP shell (Hummingbird).
        .target(
            name: "TouchLoginServer",
            dependencies: [
                "TouchLoginAPI", "WebAuthn", "EnclaveCore", "KeyAttestation", "DurableSQLite", "BlockingPool",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The login client: the flow's state machine, the server's API, an enclave-backed authenticator.
        .target(
            name: "TouchLoginClient",
            dependencies: [
                "TouchLoginAPI", "WebAuthn", "LocalAuthentication", "Security", "CryptoKit", "KeyAttestation",
            ]
        ),
        .executableTarget(
            name: "touchlogin",
            dependencies: [
                "TouchLoginClient", "TouchLoginAPI", "LocalAuthentication",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Biometric logins per second through LoginService (SQLite, PostgreSQL), and over HTTP against
        // running servers, vs the ECDSA verify rate.
        .executableTarget(
            name: "touchlogin-bench",
            dependencies: [
                "TouchLoginServer", "TouchLoginAPI", "WebAuthn",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // Its HTTP mode's client: HTTP/1.1 with keep-alive, already built for the tests.
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                // Its timing mode serves the API in-process, on a loopback port.
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // libFuzzer targets for CBOR/COSE, authenticator data and the API's JSON (scripts/fuzz-webauthn);
        // the ordinary build replays a corpus through all three.
        .executableTarget(
            name: "webauthn-fuzz",
            dependencies: ["WebAuthn", "TouchLoginAPI", "FuzzSupport"],
            path: "Fuzz/WebAuthn",
            exclude: ["corpus"]
        ),
        // libFuzzer targets for the keychain: an app's SecItem dictionaries through Security, and
        // requests from the wire through the daemon's KeychainRules (scripts/fuzz-keychain).
        .executableTarget(
            name: "keychain-fuzz",
            dependencies: ["Security", "EnclaveCore", "EnclaveProtocol", "FuzzSupport"],
            path: "Fuzz/Keychain",
            exclude: ["corpus"]
        ),
        // The entry point both fuzzers share: libFuzzer's driver, or a replay of files.
        .target(name: "FuzzSupport", path: "Fuzz/Support"),
        .executableTarget(
            name: "touchlogin-server",
            dependencies: [
                "TouchLoginServer", "WebAuthn", "EnclaveProtocol",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "EnclaveProtocolTests", dependencies: ["EnclaveProtocol"]),
        .testTarget(name: "EnclaveCoreTests", dependencies: ["EnclaveCore", "EnclaveProtocol"]),
        .testTarget(
            name: "TPMWireTests",
            dependencies: ["TPMWire", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(name: "BlockingPoolTests", dependencies: ["BlockingPool"]),
        .testTarget(
            name: "DurableSQLiteTests",
            dependencies: ["DurableSQLite", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "EnclaveServerTests",
            dependencies: [
                "EnclaveServer", "EnclaveCore", "EnclaveProtocol", "CPeerSocket", "IntegrationSupport",
                // The TPM's attestation checked as a server would (TPMDeviceAttestationTests).
                "TPMWire", .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "LocalAuthenticationTests", dependencies: ["LocalAuthentication", "EnclaveClient"]),
        .testTarget(name: "EnclaveClientTests", dependencies: ["EnclaveClient", "EnclaveProtocol"]),
        .testTarget(
            name: "SecurityTests",
            dependencies: ["Security", "LocalAuthentication", "EnclaveClient", "EnclaveProtocol"]
        ),
        // Whole-process tests, by concern; their shared helpers (processes, waiting) in one target.
        .target(
            name: "IntegrationSupport",
            dependencies: ["LocalAuthentication", "LocalAuthenticationTesting", "EnclaveClient"],
            path: "Tests/IntegrationSupport"
        ),
        // The daemon and lactl as processes: sockets, bad input, crashes, system mode, sensors, packaging.
        .testTarget(
            name: "DaemonProcessTests",
            dependencies: [
                "IntegrationSupport", "LocalAuthentication", "Security", "LocalAuthenticationTesting", "EnclaveClient",
                "EnclaveProtocol", "EnclaveCore", "CPeerSocket",
                // Deletes a TPM counter as the TPM's owner could (RollbackCounterAttackTests).
                "EnclaveServer",
                // Reads a copy of the state as someone who took it would (CryptoShreddingAttackTests), and
                // writes state in the old format (StateUpgradeTests).
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Apple's API (LocalAuthentication, Security, CryptoKit) against a daemon through TestEnclave.
        .testTarget(
            name: "AppleAPITests",
            dependencies: [
                "IntegrationSupport", "LocalAuthentication", "Security", "CryptoKit", "LocalAuthenticationTesting",
                "EnclaveClient", "EnclaveProtocol",
                // Checks the attestation chains the daemon answers as a server would, and the TPM's
                // statements (TPMWire).
                "KeyAttestation", "TPMWire", .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // App code in the shapes of Apple's documentation and samples, compiled in Swift 5 mode as apps
        // are, run against a daemon (issue 13's proof that Apple-platform code compiles unchanged).
        .testTarget(
            name: "AppleShapesTests",
            dependencies: [
                "IntegrationSupport", "LocalAuthentication", "Security", "LocalAuthenticationTesting",
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // Fingerprint login end to end: the server process, the client, independent authenticators.
        .testTarget(
            name: "TouchLoginEndToEndTests",
            dependencies: [
                "IntegrationSupport", "LocalAuthentication", "Security", "CryptoKit", "LocalAuthenticationTesting",
                "EnclaveClient", "EnclaveProtocol",
                "WebAuthn", "TouchLoginClient", "TouchLoginTestSupport",
            ]
        ),
        .testTarget(name: "TouchLoginClientTests", dependencies: ["TouchLoginClient"]),
        // The login server's core in-process (its rules, a manual clock) and through HummingbirdTesting's router.
        .target(
            name: "TouchLoginTestSupport",
            dependencies: [
                "TouchLoginServer", "TouchLoginAPI", "WebAuthn", "TPMWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Tests/TouchLoginTestSupport"
        ),
        .testTarget(
            name: "TouchLoginServerUnitTests",
            dependencies: [
                "TouchLoginServer", "TouchLoginAPI", "TouchLoginTestSupport", "WebAuthn", "KeyAttestation", "TPMWire",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "WebAuthnTests",
            dependencies: [
                "WebAuthn", "TPMWire", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "KeyAttestationTests",
            dependencies: [
                "KeyAttestation", "EnclaveProtocol", .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
