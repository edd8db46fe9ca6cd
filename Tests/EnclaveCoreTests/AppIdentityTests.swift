import EnclaveCore
import XCTest

/// The identity rule: a path counts only when the daemon finds the running file there.
final class AppIdentityTests: XCTestCase {
    let victim = AppIdentity.FileID(device: 2049, inode: 1001)
    let forged = AppIdentity.FileID(device: 2049, inode: 2002)

    func testAPathIsTheIdentityOnlyWhenTheDaemonFindsTheRunningFileThere() {
        let cases:
            [(
                path: String, running: AppIdentity.FileID, atPath: AppIdentity.FileID?, name: String,
                kind: AppIdentity.Kind, why: String
            )] = [
                (
                    "/usr/bin/victim", victim, victim, "/usr/bin/victim", .app,
                    "the file at the path is the file that runs"
                ),
                (
                    "/usr/bin/victim", forged, victim, "unverified:2049:2002:/usr/bin/victim", .unverified,
                    "another file bind-mounted over the path in the client's own mount namespace"
                ),
                (
                    "/app/bin/editor", forged, nil, "unverified:2049:2002:/app/bin/editor", .unverified,
                    "a path only a sandbox has (Flatpak's /app)"
                ),
                (
                    "/usr/bin/victim (deleted)", victim, nil, "unverified:2049:1001:/usr/bin/victim (deleted)",
                    .unverified,
                    "a binary replaced or removed while it runs"
                ),
                (
                    "/usr/bin/python3.11", victim, victim, "/usr/bin/python3.11", .interpreter,
                    "an interpreter, verified"
                ),
                (
                    "/usr/bin/python3.11", forged, victim, "unverified:2049:2002:/usr/bin/python3.11", .unverified,
                    "a forged interpreter path"
                ),
                ("victim", victim, victim, "unverified:2049:1001:victim", .unverified, "not an absolute path"),
            ]
        for c in cases {
            let identity = AppIdentity.resolve(path: c.path, running: c.running, atPath: c.atPath)
            XCTAssertEqual(identity.name, c.name, c.why)
            XCTAssertEqual(identity.kind, c.kind, c.why)
        }
    }

    func testInterpretersHaveNoGroupOfTheirOwn() {
        let cases: [(path: String, interpreter: Bool)] = [
            ("/usr/bin/python3.11", true), ("/usr/bin/python3", true), ("/usr/bin/perl", true),
            ("/usr/bin/perl5.36.0", true),
            ("/usr/bin/node", true), ("/usr/bin/bash", true), ("/bin/sh", true), ("/usr/bin/dash", true),
            ("/usr/bin/ruby3.1", true),
            ("/usr/lib/jvm/java-17-openjdk-amd64/bin/java", true),
            ("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", true),
            ("/usr/bin/socat", true), ("/usr/bin/nc.openbsd", true), ("/usr/bin/qemu-aarch64", true),
            ("/usr/bin/gdb", true),
            ("/usr/bin/lactl", false), ("/usr/bin/firefox-esr", false), ("/opt/app/bin/shell-helper", false),
            ("/usr/bin/bashful", false),
            ("/usr/bin/nautilus", false), ("/usr/bin/javac", false),
        ]
        for c in cases {
            XCTAssertEqual(AppIdentity.isInterpreter(c.path), c.interpreter, c.path)
            let identity = AppIdentity.resolve(path: c.path, running: victim, atPath: victim)
            XCTAssertEqual(identity.ownGroup, c.interpreter ? nil : c.path, c.path)
        }
        let unverified = AppIdentity.resolve(path: "/usr/bin/python3", running: forged, atPath: victim)
        XCTAssertEqual(
            unverified.ownGroup,
            unverified.name,
            "an unverified executable keeps its items apart, under its own name"
        )
    }

    func testNoGroupMayBeNamedLikeAnIdentity() {
        XCTAssertTrue(AppIdentity.isIdentityName("/usr/bin/victim"))
        XCTAssertTrue(AppIdentity.isIdentityName("unverified:2049:2002:/usr/bin/victim"))
        XCTAssertTrue(AppIdentity.isIdentityName("flatpak:org.example.App"))
        XCTAssertTrue(AppIdentity.isIdentityName("snap:firefox"))
        XCTAssertFalse(AppIdentity.isIdentityName("team"))
        XCTAssertFalse(AppIdentity.isIdentityName("com.example.shared"))
    }

    func testGroupMembersAreExecutablePathsOrVerifiableSandboxedApps() {
        let cases: [(name: String, member: Bool)] = [
            ("/usr/bin/editor", true), ("flatpak:org.example.App", true), ("flatpak:org.example.my-app", true),
            ("snap:firefox", true),
            ("snap:firefox_work", true), ("flatpak:example", false), ("flatpak:../../etc", false),
            ("snap:Firefox", false),
            ("snap:a", false), ("snap:firefox.firefox", false), ("unverified:1:2:/usr/bin/editor", false),
            ("editor", false), ("", false),
        ]
        for c in cases { XCTAssertEqual(AppIdentity.isMemberName(c.name), c.member, c.name) }
    }

    /// Which evidence names a client, in order: a verified snap, a verified Flatpak instance, the
    /// file it runs.
    func testASandboxsVerifiedNameOutranksTheProgramItRuns() {
        let info = Array("[Application]\nname=org.example.App\n\n[Instance]\ninstance-id=42\n".utf8)
        let namespace = AppIdentity.FileID(device: 4, inode: 4_026_532_177)
        let host = AppIdentity.FileID(device: 4, inode: 4_026_531_841)
        let live = SandboxIdentity.FlatpakEvidence(
            clientUser: 1000,
            clientNamespace: namespace,
            info: info,
            record: .init(owner: 1000, info: info, sandboxProcess: (1000, namespace))
        )
        var forged = live
        forged.record = nil
        let flatpak = AppIdentity.resolve(
            path: "/usr/bin/python3",
            running: namespace,
            atPath: nil,
            sandbox: .init(flatpak: live)
        )
        XCTAssertEqual(flatpak, AppIdentity(name: "flatpak:org.example.App", kind: .sandboxed))
        XCTAssertEqual(
            flatpak.ownGroup,
            "flatpak:org.example.App",
            "a Flatpak app keeps items of its own, whatever interpreter it runs"
        )
        XCTAssertEqual(
            AppIdentity.resolve(
                path: "/usr/bin/editor",
                running: victim,
                atPath: victim,
                sandbox: .init(flatpak: forged)
            ).name,
            "/usr/bin/editor",
            "a claim that does not verify leaves the process what it runs"
        )
        XCTAssertEqual(
            AppIdentity.resolve(
                path: "/usr/bin/editor",
                running: forged.clientNamespace,
                atPath: victim,
                sandbox: .init(flatpak: forged)
            ).kind,
            .unverified
        )

        let program = "/snap/firefox/4336/usr/lib/firefox/firefox"
        func snap(_ label: String, in client: AppIdentity.FileID) -> AppIdentity {
            AppIdentity.resolve(
                path: program,
                running: victim,
                atPath: victim,
                sandbox: .init(
                    flatpak: live,
                    snap: .init(label: label, clientNamespace: client, snapNamespaces: [namespace])
                )
            )
        }
        XCTAssertEqual(
            snap("snap.firefox.firefox (enforce)", in: namespace),
            AppIdentity(name: "snap:firefox", kind: .sandboxed),
            "one name for every revision of the snap, before anything else"
        )
        XCTAssertEqual(
            snap("snap.firefox.firefox (enforce)", in: host).name,
            "flatpak:org.example.App",
            "the label taken by change_profile outside the snap's namespace names nothing"
        )
        XCTAssertEqual(
            snap("snap.firefox.firefox (complain)", in: namespace).name,
            "flatpak:org.example.App",
            "devmode is not confined"
        )
        XCTAssertEqual(
            AppIdentity.resolve(path: program, running: victim, atPath: victim, sandbox: .init()).name,
            program
        )
    }
}
