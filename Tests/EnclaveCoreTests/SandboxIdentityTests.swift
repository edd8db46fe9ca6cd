import EnclaveCore
import XCTest

/// The sandbox rules: when a Flatpak claim or a snap's label names an app, and when the daemon may
/// even read the claim.
final class SandboxIdentityTests: XCTestCase {
    private let info = "[Application]\nname=org.example.App\nruntime=runtime/org.gnome.Platform/x86_64/46\n\n[Instance]\ninstance-id=2749486820\nbranch=stable\n"

    func testFlatpakInfoNamesAnAppAndItsInstanceOrNothing() {
        let cases: [(text: String, parsed: SandboxIdentity.FlatpakInfo?, why: String)] = [
            (info, .init(appID: "org.example.App", instanceID: "2749486820"), "as flatpak writes it"),
            ("# comment\n[Application]\n  name = org.example.App  \n[Instance]\ninstance-id=7\n", .init(appID: "org.example.App", instanceID: "7"),
             "comments and spaces around keys and values"),
            ("[Runtime]\nname=org.gnome.Platform\n[Application]\nname=org.example.App\n[Instance]\ninstance-id=7\n", nil, "a runtime run on its own"),
            ("[Application]\nname=org.example.App\n", nil, "no instance"),
            ("[Instance]\ninstance-id=7\n", nil, "no app"),
            ("[Application]\nname=org.example.App\nname=org.example.Other\n[Instance]\ninstance-id=7\n", nil, "a key given twice"),
            ("[Application]\nname=org.example.App\n[Instance]\ninstance-id=../../victim\n", nil, "an instance id that is a path"),
            ("[Application]\nname=org.example.App\n[Instance]\ninstance-id=\n", nil, "an empty instance id"),
            ("[Application]\nname=example\n[Instance]\ninstance-id=7\n", nil, "an app id of one element"),
            ("name=org.example.App\n[Instance]\ninstance-id=7\n", nil, "a key outside any group"),
            ("[Application\nname=org.example.App\n[Instance]\ninstance-id=7\n", nil, "a broken group line"),
            ("[Application]\njunk\n[Instance]\ninstance-id=7\n", nil, "a line that is no key"),
            ("", nil, "empty"),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.FlatpakInfo.parse(Array(c.text.utf8)), c.parsed, c.why) }
        XCTAssertNil(SandboxIdentity.FlatpakInfo.parse([0xff, 0xfe] + Array(info.utf8)), "not UTF-8")
        XCTAssertNil(SandboxIdentity.FlatpakInfo.parse(Array(info.utf8) + Array(repeating: UInt8(ascii: "#"), count: SandboxIdentity.FlatpakInfo.maximumSize)),
                     "larger than any flatpak writes")
    }

    func testFlatpakAppIDsFollowFlatpaksRule() {
        let cases: [(id: String, valid: Bool)] = [
            ("org.example.App", true), ("org.gnome.Nautilus", true), ("io.github.user_name.my-app", true), ("com.example.App2", true),
            ("org.example", false), ("org..App", false), ("org.example.", false), ("org.2example.App", false), ("org.my-example.App", false),
            ("org.example.App/evil", false), ("org.exämple.App", false), ("org.example.App\n", false),
            ("org.example." + String(repeating: "a", count: 250), false),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.FlatpakInfo.isValidAppID(c.id), c.valid, c.id) }
    }

    func testTheSandboxsFirstProcessComesFromBwrapInfo() {
        let cases: [(json: String, pid: Int32?)] = [
            (#"{"child-pid": 21813, "mnt-namespace": 4026532177}"#, 21813), (#"{"mnt-namespace": 4026532177}"#, nil),
            (#"{"child-pid": 1}"#, nil), (#"{"child-pid": -5}"#, nil), (#"{"child-pid": "21813"}"#, nil), ("[]", nil), ("", nil),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.sandboxProcess(bwrapInfo: Array(c.json.utf8)), c.pid, c.json) }
    }

    /// Each way a claim falls short, and the one way it verifies.
    func testAFlatpakClaimVerifiesOnlyWithALiveInstanceInTheClientsOwnNamespace() {
        let claim = Array(info.utf8)
        let mine = AppIdentity.FileID(device: 4, inode: 4026532177), another = AppIdentity.FileID(device: 4, inode: 4026532300)
        typealias Record = SandboxIdentity.FlatpakEvidence.InstanceRecord
        let cases: [(record: Record?, claim: [UInt8], verdict: SandboxIdentity.FlatpakVerdict, why: String)] = [
            (Record(owner: 1000, info: claim, sandboxProcess: (1000, mine)), claim,
             .verified(AppIdentity(name: "flatpak:org.example.App", kind: .sandboxed)), "the live instance the client runs in"),
            (nil, claim, .noInstanceRecord, "a /.flatpak-info made with unshare or bwrap, naming no instance"),
            (Record(owner: 1001, info: claim, sandboxProcess: (1000, mine)), claim, .recordNotTheUsers, "a record of another user's"),
            (Record(owner: 1000, info: Array(info.replacingOccurrences(of: "App", with: "Victim").utf8), sandboxProcess: (1000, mine)), claim,
             .recordDiffers, "a claim naming another app's instance"),
            (Record(owner: 1000, info: claim, sandboxProcess: nil), claim, .instanceEnded, "an instance that ended"),
            (Record(owner: 1000, info: claim, sandboxProcess: (1001, mine)), claim, .instanceEnded, "its pid now another user's process"),
            (Record(owner: 1000, info: claim, sandboxProcess: (1000, another)), claim, .otherNamespace,
             "a copy of a live instance's info, in the attacker's own namespace"),
            (Record(owner: 1000, info: claim, sandboxProcess: (1000, mine)), Array("[Application]\nname=x\n".utf8), .malformedInfo, "not an app's info"),
        ]
        for c in cases {
            let evidence = SandboxIdentity.FlatpakEvidence(clientUser: 1000, clientNamespace: mine, info: c.claim, record: c.record)
            XCTAssertEqual(SandboxIdentity.verify(evidence), c.verdict, c.why)
        }
    }

    func testASnapIsNamedByItsEnforcedAppArmorLabelOnly() {
        let cases: [(label: String, name: String?)] = [
            ("snap.firefox.firefox (enforce)", "snap:firefox"), ("snap.firefox.geckodriver (enforce)", "snap:firefox"),
            ("snap.firefox.hook.configure (enforce)", "snap:firefox"), ("snap.firefox_work.firefox (enforce)", "snap:firefox_work"),
            ("snap.firefox.firefox (enforce)\n", "snap:firefox"), ("snap.firefox.firefox (enforce)\0", "snap:firefox"),
            ("snap.lxd.lxc (enforce)", "snap:lxd"), ("snap.code.code-url-handler (enforce)", "snap:code"),
            ("snap.firefox.firefox (complain)", nil), ("snap.firefox.firefox", nil), ("unconfined", nil),
            ("snap-update-ns.firefox (enforce)", nil), ("snap.firefox.firefox//hat (enforce)", nil),
            ("snap.firefox.firefox//&other (enforce)", nil), ("snap.Firefox.firefox (enforce)", nil), ("snap.-fire.firefox (enforce)", nil),
            ("snap.fire--fox.firefox (enforce)", nil), ("snap.1234.app (enforce)", nil), ("snap.firefox_TOOLONGKEY1.app (enforce)", nil),
            ("snap.firefox. (enforce)", nil), ("snap.firefox.hook. (enforce)", nil), ("snap.firefox.a.b (enforce)", nil),
            ("/usr/bin/evince (enforce)", nil), ("system_u:system_r:snap.firefox.firefox (enforce)", nil), ("", nil),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.snap(label: c.label)?.name, c.name, c.label) }
    }

    func testTheClaimIsReadOnlyWhereNoProgramCanMakeTheReadWait() {
        let flatpak = """
            65 42 0:40 /newroot / rw,nosuid,nodev,relatime - tmpfs tmpfs rw
            91 65 0:40 /bindfilePpnNGO//deleted /.flatpak-info ro,nosuid,nodev,relatime - tmpfs tmpfs rw
            92 65 0:27 /usr /usr ro,nosuid,nodev,relatime - ext4 /dev/vda rw
            """
        let cases: [(mountinfo: String, safe: Bool, why: String)] = [
            (flatpak, true, "flatpak's: a tmpfs root and a tmpfs file"),
            ("65 42 0:40 / / rw - tmpfs tmpfs rw", true, "a tmpfs root with the file in it"),
            ("65 42 0:40 / / rw - tmpfs tmpfs rw\n66 65 0:50 / / rw - fuse.evil evil rw", false, "a FUSE mount over the root"),
            ("65 42 0:40 / / rw - tmpfs tmpfs rw\n91 65 0:50 / /.flatpak-info ro - fuse.evil evil rw", false, "the file on FUSE"),
            ("65 42 0:40 / / rw - tmpfs tmpfs rw\n91 65 0:51 / /.flatpak-info ro - overlay overlay rw", false, "the file on overlayfs (over anything)"),
            ("65 42 0:40 / / rw - overlay overlay rw", false, "an overlayfs root"),
            ("65 42 8:1 / / rw - ext4 /dev/sda1 rw", false, "the host's root: not a sandbox flatpak makes"),
            ("70 42 0:50 /jail /home rw - fuse.evil evil rw", false, "a chroot inside another mount: no mount at /"),
            ("", false, "nothing readable"),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.flatpakInfoIsSafeToRead(mounts: SandboxIdentity.mounts(c.mountinfo)), c.safe, c.why) }
        XCTAssertEqual(SandboxIdentity.mounts(#"36 35 98:0 /mnt1 /mnt\040with\040space rw - ext3 /dev/root rw"#).first?.point, "/mnt with space")
    }

    func testTheInstanceRecordIsReadOnlyOnLocalFileSystems() {
        let own = """
            22 1 8:1 / / rw - ext4 /dev/sda1 rw
            30 22 0:26 / /run rw - tmpfs tmpfs rw
            40 30 0:45 / /run/user/1000 rw - tmpfs tmpfs rw
            50 22 0:60 / /home/u/mnt rw - fuse.sshfs u@host: rw
            """
        XCTAssertTrue(SandboxIdentity.isLocal("/run/user/1000/.flatpak/42", mounts: SandboxIdentity.mounts(own)))
        let cases: [(extra: String, local: Bool, why: String)] = [
            ("60 40 0:61 / /run/user/1000/.flatpak rw - fuse.evil evil rw", false, "fusermount over the records"),
            ("60 40 0:61 / /run/user/1000/.flatpak/42/info rw - fuse.evil evil rw", false, "over a file of the record"),
            ("60 30 0:61 / /run/user/1000 rw - fuse.evil evil rw", false, "over the runtime directory itself"),
            ("60 40 0:61 / /run/user/1000/.flatpak/4242 rw - fuse.evil evil rw", true, "another instance's record, not read"),
            ("60 40 0:61 / /run/user/1000/doc rw - fuse.xdg-document-portal portal rw", true, "the document portal beside it"),
        ]
        for c in cases { XCTAssertEqual(SandboxIdentity.isLocal("/run/user/1000/.flatpak/42", mounts: SandboxIdentity.mounts(own + "\n" + c.extra)), c.local, c.why) }
    }
}
