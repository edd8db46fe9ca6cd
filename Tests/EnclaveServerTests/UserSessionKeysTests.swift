import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import IntegrationSupport
import Logging
import Synchronization
import XCTest

@testable import EnclaveServer

/// A user's Secure Enclave keys on a TPM root, driven through the user's state owner: a key is
/// the TPM's, and a use that waited for the TPM gives nothing when the key was deleted meanwhile.
final class UserSessionKeysTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private var directory: String!
    private var daemon: EnclaveDaemon!
    private let app = AppIdentity(name: "/usr/bin/example-app", kind: .app)

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        tpm = try SwtpmSimulator()
        directory = NSTemporaryDirectory() + "user-session-keys-\(UUID().uuidString)"
        var config = DaemonConfiguration.inProcess(directory)
        config.tpm = .tcti(tpm.tcti)
        daemon = try EnclaveDaemon(config: config, clock: ManualClock(), logger: Logger(label: "test"))
    }

    override func tearDown() {
        daemon = nil
        tpm?.destroy()
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Attack: an app asks for a signature with a key that is about to be deleted. The TPM is busy,
    /// so the signature waits for it while the user's other requests run, and the key's record
    /// goes meanwhile. The signature the TPM then makes is never answered.
    func testASignatureThatWaitedForTheTPMIsDroppedWhenItsKeyWasDeleted() async throws {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        let protected = AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: [])
        guard
            case .answered(let made) = await session.keyStart(
                KeyRequest(operation: .create, kind: .signing, accessControl: protected, context: "c"),
                app: app
            ), let blob = made.blob
        else { return XCTFail("no key made") }
        let sign = KeyRequest(
            operation: .sign,
            kind: .signing,
            blob: blob,
            digest: Data(SHA256.hash(data: Data("x".utf8))),
            context: "c"
        )
        guard case .answered(let first) = await session.keyStart(sign, app: app) else { return XCTFail("prompted") }
        XCTAssertNotNil(first.signature, "\(first)")

        let held = Atomic(false)
        let release = DispatchSemaphore(value: 0)
        var released = false
        defer { if !released { release.signal() } }
        let holder = Task {
            try await BlockingWork.tpm {
                held.store(true, ordering: .sequentiallyConsistent)
                release.wait()
            }
        }
        while !held.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(5)) }
        let app = self.app
        let waiting = Task { await session.keyStart(sign, app: app) }
        // The signature waits for the TPM while the user's actor is free: the key's record goes
        // meanwhile, as deleting the keychain item that holds it removes it (a passcode removal
        // would wait for the TPM too: it moves the rollback counter).
        guard case .tpm(_, _, let admission?) = session.keyEngine else { return XCTFail("not a TPM engine") }
        let deadline = ContinuousClock.now + .seconds(10)
        while admission.admittedNow < 1 {
            guard ContinuousClock.now < deadline else { return XCTFail("the signature never reached the TPM") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let handle = try XCTUnwrap(KeyBlob.handle(of: blob))
        try await daemon.storage.pool.write { db in
            try db.execute(sql: "DELETE FROM enclave_key WHERE handle = ?", arguments: [handle.bytes])
        }
        release.signal()
        released = true
        try await holder.value
        guard case .answered(let late) = await waiting.value else { return XCTFail("prompted") }
        XCTAssertNil(late.signature, "a signature answered for a key destroyed while it waited")
        XCTAssertEqual(late.problem, .invalidKey, "\(late)")
    }
}
