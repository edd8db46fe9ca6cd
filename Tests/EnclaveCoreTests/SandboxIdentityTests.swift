import EnclaveCore
import XCTest

/// The sandbox rules: when a Flatpak claim or a snap's label names an app, and when the daemon may
/// even read the claim.
final class SandboxIdentityTests: XCTestCase {
    private let info =
        "[Application]\nname=org.example.App\nruntime=runtime/org.gnome.Platform/x86_64/46\n\n[Instance]\ninstance-id=2749486820\nbranch=stable\n"

    func testFlatpakInfoNamesAnAppAndItsInstanceOrNothing() {
        let cases: [(text: String, parsed: SandboxIdentity.FlatpakInfo?, why: String)] = [
            (info, .init(appID: "org.example.App", instanceID: "2749486820"), "as flatpak writes it"),
            (
                "# comment\n[Application]\n  name = org.example.App  \n[Instance]\ninstance-id=7\n",
                .init(appID: "org.example.App", instanceID: "7"),
                "comments and spaces around keys and values"
            ),
            (
                "[Runtime]\nname=org.gnome.Platform\n[Application]\nname=org.example.App\n[Instance]\ninstance-id=7\n",
                nil, "a runtime run on its own"
            ),
            ("[Application]\nname=org.example.App\n", nil, "no instance"),
            ("[Instance]\ninstance-id=7\n", nil, "no app"),
            (
                "[Application]\nname=org.example.App\nname=org.example.Other\n[Instance]\ninstance-id=7\n", nil,
                "a key given twice"
            ),
            (
                "[Application]\nname=org.example.App\n[Instance]\ninstance-id=../../victim\n", nil,
                "an instance id that is a path"
            ),
            ("[Application]\nname=org.example.App\n[Instance]\ninstance-id=\n", nil, "an empty instance id"),
            ("[Application]\nname=example\n[Instance]\ninstance-id=7\n", nil, "an app id of one element"),
            ("name=org.example.App\n[Instance]\ninstance-id=7\n", nil, "a key outside any group"),
            ("[Application\nname=org.example.App\n[Instance]\ninstance-id=7\n", nil, "a broken group line"),
            ("[Application]\njunk\n[Instance]\ninstance-id=7\n", nil, "a line that is no key"),
            ("", nil, "empty"),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.FlatpakInfo.parse(Array(c.text.utf8)), c.parsed, c.why) }
        XCTAssertNil(SandboxIdentity.FlatpakInfo.parse([0xff, 0xfe] + Array(info.utf8)), "not UTF-8")
        XCTAssertNil(
            SandboxIdentity.FlatpakInfo.parse(
                Array(info.utf8) + Array(repeating: UInt8(ascii: "#"), count: SandboxIdentity.FlatpakInfo.maximumSize)
            ),
            "larger than any flatpak writes"
        )
    }

    func testFlatpakAppIDsFollowFlatpaksRule() {
        let cases: [(id: String, valid: Bool)] = [
            ("org.example.App", true), ("org.gnome.Nautilus", true), ("io.github.user_name.my-app", true),
            ("com.example.App2", true),
            ("org.example", false), ("org..App", false), ("org.example.", false), ("org.2example.App", false),
            ("org.my-example.App", false),
            ("org.example.App/evil", false), ("org.exämple.App", false), ("org.example.App\n", false),
            ("org.example." + String(repeating: "a", count: 250), false),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.FlatpakInfo.isValidAppID(c.id), c.valid, c.id) }
    }

    func testTheSandboxsFirstProcessComesFromBwrapInfo() {
        let cases: [(json: String, pid: Int32?)] = [
            (#"{"child-pid": 21813, "mnt-namespace": 4026532177}"#, 21813), (#"{"mnt-namespace": 4026532177}"#, nil),
            (#"{"child-pid": 1}"#, nil), (#"{"child-pid": -5}"#, nil), (#"{"child-pid": "21813"}"#, nil), ("[]", nil),
            ("", nil),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.sandboxProcess(bwrapInfo: Array(c.json.utf8)), c.pid, c.json) }
    }

    /// Each way a claim falls short, and the one way it verifies.
    func testAFlatpakClaimVerifiesOnlyWithALiveInstanceInTheClientsOwnNamespace() {
        let claim = Array(info.utf8)
        let mine = AppIdentity.FileID(device: 4, inode: 4_026_532_177)
        let another = AppIdentity.FileID(device: 4, inode: 4_026_532_300)
        typealias Record = SandboxIdentity.FlatpakEvidence.InstanceRecord
        let cases: [(record: Record?, claim: [UInt8], verdict: SandboxIdentity.FlatpakVerdict, why: String)] = [
            (
                Record(owner: 1000, info: claim, sandboxProcess: (1000, mine)), claim,
                .verified(AppIdentity(name: "flatpak:org.example.App", kind: .sandboxed)),
                "the live instance the client runs in"
            ),
            (nil, claim, .noInstanceRecord, "a /.flatpak-info made with unshare or bwrap, naming no instance"),
            (
                Record(owner: 1001, info: claim, sandboxProcess: (1000, mine)), claim, .recordNotTheUsers,
                "a record of another user's"
            ),
            (
                Record(
                    owner: 1000,
                    info: Array(info.replacingOccurrences(of: "App", with: "Victim").utf8),
                    sandboxProcess: (1000, mine)
                ), claim,
                .recordDiffers, "a claim naming another app's instance"
            ),
            (Record(owner: 1000, info: claim, sandboxProcess: nil), claim, .instanceEnded, "an instance that ended"),
            (
                Record(owner: 1000, info: claim, sandboxProcess: (1001, mine)), claim, .instanceEnded,
                "its pid now another user's process"
            ),
            (
                Record(owner: 1000, info: claim, sandboxProcess: (1000, another)), claim, .otherNamespace,
                "a copy of a live instance's info, in the attacker's own namespace"
            ),
            (
                Record(owner: 1000, info: claim, sandboxProcess: (1000, mine)), Array("[Application]\nname=x\n".utf8),
                .malformedInfo, "not an app's info"
            ),
        ]
        for c in cases {
            let evidence = SandboxIdentity.FlatpakEvidence(
                clientUser: 1000,
                clientNamespace: mine,
                info: c.claim,
                record: c.record
            )
            XCTAssertEqual(SandboxIdentity.verify(evidence), c.verdict, c.why)
        }
    }

    func testASnapIsNamedByItsEnforcedAppArmorLabelOnly() {
        let cases: [(label: String, name: String?)] = [
            ("snap.firefox.firefox (enforce)", "snap:firefox"), ("snap.firefox.geckodriver (enforce)", "snap:firefox"),
            ("snap.firefox.hook.configure (enforce)", "snap:firefox"),
            ("snap.firefox_work.firefox (enforce)", "snap:firefox_work"),
            ("snap.firefox.firefox (enforce)\n", "snap:firefox"), ("snap.firefox.firefox (enforce)\0", "snap:firefox"),
            ("snap.lxd.lxc (enforce)", "snap:lxd"), ("snap.code.code-url-handler (enforce)", "snap:code"),
            ("snap.firefox.firefox (complain)", nil), ("snap.firefox.firefox", nil), ("unconfined", nil),
            ("snap-update-ns.firefox (enforce)", nil), ("snap.firefox.firefox//hat (enforce)", nil),
            ("snap.firefox.firefox//&other (enforce)", nil), ("snap.Firefox.firefox (enforce)", nil),
            ("snap.-fire.firefox (enforce)", nil),
            ("snap.fire--fox.firefox (enforce)", nil), ("snap.1234.app (enforce)", nil),
            ("snap.firefox_TOOLONGKEY1.app (enforce)", nil),
            ("snap.firefox. (enforce)", nil), ("snap.firefox.fire--fox (enforce)", nil),
            ("snap.firefox.hook. (enforce)", nil), ("snap.firefox.a.b (enforce)", nil),
            ("/usr/bin/evince (enforce)", nil), ("system_u:system_r:snap.firefox.firefox (enforce)", nil), ("", nil),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.snap(label: c.label)?.name, c.name, c.label) }
    }

    func testASnapsLabelCountsOnlyInsideTheNamespaceSnapdKeepsForIt() {
        let snapNamespace = AppIdentity.FileID(device: 4, inode: 4_026_532_400)
        let userNamespace = AppIdentity.FileID(device: 4, inode: 4_026_532_401)
        let host = AppIdentity.FileID(device: 4, inode: 4_026_531_841)
        let cases:
            [(label: String, client: AppIdentity.FileID, found: [AppIdentity.FileID], name: String?, why: String)] = [
                (
                    "snap.firefox.firefox (enforce)", snapNamespace, [snapNamespace], "snap:firefox",
                    "the snap, in its own namespace"
                ),
                (
                    "snap.firefox.firefox (enforce)", userNamespace, [snapNamespace, userNamespace], "snap:firefox",
                    "in its per-user namespace"
                ),
                (
                    "snap.firefox.firefox (enforce)", host, [snapNamespace], nil,
                    "an unconfined process (or a Flatpak app) that changed its profile"
                ),
                ("snap.firefox.firefox (enforce)", snapNamespace, [], nil, "snapd keeps no namespace for it"),
                ("snap.firefox.firefox (complain)", snapNamespace, [snapNamespace], nil, "devmode"),
            ]
        for c in cases {
            XCTAssertEqual(
                SandboxIdentity.verify(
                    SandboxIdentity.SnapEvidence(label: c.label, clientNamespace: c.client, snapNamespaces: c.found)
                )?.name,
                c.name,
                c.why
            )
        }
        XCTAssertEqual(
            SandboxIdentity.snapNamespacePaths(instance: "firefox_work", user: 1000),
            ["/run/snapd/ns/firefox_work.mnt", "/run/snapd/ns/firefox_work.1000.mnt"]
        )
    }

    func testMountTableLinesNameTheMountAndItsFileSystem() {
        let cases: [(line: String, id: Int?, point: String?, type: String?)] = [
            ("65 42 0:40 /newroot / rw,nosuid,nodev,relatime - tmpfs tmpfs rw", 65, "/", "tmpfs"),
            (
                "91 65 0:40 /bindfilePpnNGO//deleted /.flatpak-info ro,nosuid,nodev,relatime - tmpfs tmpfs rw", 91,
                "/.flatpak-info", "tmpfs"
            ),
            (
                "36 35 98:0 /mnt1 /mnt\\040with\\040space rw shared:1 master:2 - ext3 /dev/root rw", 36,
                "/mnt with space", "ext3"
            ),
            ("50 22 0:60 / /home/u/mnt rw - fuse.sshfs u@host: rw", 50, "/home/u/mnt", "fuse.sshfs"),
            ("x 42 0:40 / / rw - tmpfs tmpfs rw", nil, nil, nil), ("65 42 0:40 / / rw tmpfs tmpfs rw", nil, nil, nil),
            ("", nil, nil, nil),
        ]
        for c in cases {
            let mount = SandboxIdentity.mount(Substring(c.line))
            XCTAssertEqual(mount?.id, c.id, c.line)
            XCTAssertEqual(mount?.point, c.point, c.line)
            XCTAssertEqual(mount?.type, c.type, c.line)
        }
    }

    /// A claim is read only from tmpfs, the record only from a local file system: nothing a
    /// program answers for (FUSE, overlayfs over FUSE, a network file system) is ever asked.
    func testNothingIsReadFromAFileSystemAProgramCouldMakeWait() {
        let cases: [(type: String, claim: Bool, record: Bool)] = [
            ("tmpfs", true, true), ("ext4", false, true), ("btrfs", false, true), ("overlay", false, false),
            ("fuse", false, false),
            ("fuse.sshfs", false, false), ("fuseblk", false, false), ("nfs4", false, false), ("9p", false, false),
            ("cifs", false, false),
            ("", false, false),
        ]
        for c in cases {
            XCTAssertEqual(SandboxIdentity.mayReadClaim(on: c.type), c.claim, c.type)
            XCTAssertEqual(SandboxIdentity.mayReadRecord(on: c.type), c.record, c.type)
        }
    }
}
