import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import IntegrationSupport
import Synchronization
import XCTest

@testable import EnclaveServer

/// Where Secure Enclave keys live: the software engine's keys hold their scalar, the TPM engine's
/// only a blob; a TPM key is refused by the software engine with a reason; one user's flood of key
/// uses on the TPM is refused past its share while another user's use is admitted.
final class KeyEngineTests: XCTestCase {
    private func blob(_ kind: KeyRequest.Kind, _ made: (privateKey: Data, tpm: TPMKeyMaterial?)) -> KeyBlob {
        KeyBlob(
            kind: kind,
            privateKey: made.privateKey,
            protection: .whenUnlocked,
            flags: [],
            enrolmentGeneration: 0,
            passcodeEpoch: 0,
            tpm: made.tpm
        )
    }

    private let digest = PrehashedSHA256(Data(SHA256.hash(data: Data("message".utf8))))!

    func testTheSoftwareEngineSignsAndAgreesAndRefusesATPMKey() async throws {
        let engine = KeyEngine.software
        let key = blob(.general, try await engine.create(.general))
        XCTAssertNil(key.tpm)
        let signature = try await engine.sign(digest, with: key)
        XCTAssertTrue(try key.publicKey.isValidSignature(signature, for: digest))
        let peer = P256.KeyAgreement.PrivateKey()
        let shared = try await engine.agree(peer.publicKey, with: key)
        let expected = try peer.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(x963Representation: key.publicKey.x963Representation)
        )
        XCTAssertEqual(shared, expected.withUnsafeBytes { Data($0) })

        var held = key
        held.privateKey = Data()
        held.tpm = TPMKeyMaterial(blob: Data([1]), auth: Data([2]), publicKey: try key.publicKey.x963Representation)
        do {
            _ = try await engine.sign(digest, with: held)
            XCTFail("a software engine signed with a TPM's key")
        } catch let error as DaemonError {
            XCTAssertEqual(error.keyProblem, .notAvailable)
            XCTAssertTrue(error.message.contains("inside a TPM"), error.message)
        }
    }

    /// Attack: one user floods the TPM with signatures (a TPM takes 25–200 ms each), so every
    /// other user's key use and rollback counter move waits behind the whole flood — here from two
    /// of its subordinate uids, two sessions of its own (before `TPMAdmissions`, each session had
    /// its own share, so every subordinate uid added `usesPerUser` uses to the queue). With the
    /// TPM's thread held, the flooding user's uses past its one share are refused at once, and the
    /// other user's is admitted beside them; released, all admitted uses sign.
    func testOneUsersFloodIsRefusedPastItsShareAndAnotherUserIsServed() async throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        let tpm = try SwtpmSimulator()
        defer { tpm.destroy() }
        let daemon = KeyEngine.tpm(tcti: tpm.tcti)
        let admissions = TPMAdmissions()
        let subordinates = SubordinateIDs(ranges: [.init(owner: 1000, first: 100_000, count: 65_536)])
        let flooder = daemon.forUser { admissions.admission(for: 100_000, subordinates: subordinates) }
        let flooderTwin = daemon.forUser { admissions.admission(for: 100_001, subordinates: subordinates) }
        let other = daemon.forUser { admissions.admission(for: 1001, subordinates: subordinates) }
        let flooderKey = blob(.signing, try await flooder.create(.signing))
        let otherKey = blob(.signing, try await other.create(.signing))
        XCTAssertEqual(flooderKey.privateKey, Data(), "the daemon holds no scalar of a TPM key")
        XCTAssertNotNil(flooderKey.tpm)

        let started = Atomic(false)
        let release = DispatchSemaphore(value: 0)
        // Whatever happens, the TPM's thread (the whole test process's) is given back.
        var released = false
        defer { if !released { release.signal() } }
        let holder = Task {
            try await BlockingWork.tpm {
                started.store(true, ordering: .sequentiallyConsistent)
                release.wait()
            }
        }
        try await waitUntil("the TPM's thread is held") { started.load(ordering: .sequentiallyConsistent) }

        let uses = 20
        let digest = self.digest
        let refusedSoFar = Atomic(0)
        let flood = (0..<uses).map { use in
            Task { @Sendable () -> KeyReply.Problem? in
                do {
                    _ = try await (use % 2 == 0 ? flooder : flooderTwin).sign(digest, with: flooderKey)
                    return nil
                } catch {
                    refusedSoFar.add(1, ordering: .sequentiallyConsistent)
                    return (error as? DaemonError)?.keyProblem ?? .invalidKey
                }
            }
        }
        guard case .tpm(_, _, let flooderAdmission?) = flooder, case .tpm(_, _, let otherAdmission?) = other else {
            return XCTFail("users' engines have their admissions")
        }
        // Every use of the flood has been admitted or refused before the TPM's thread is given back.
        try await waitUntil("each use of the flood was admitted or refused") {
            flooderAdmission.admittedNow + refusedSoFar.load(ordering: .sequentiallyConsistent) == uses
        }
        let served = Task { try await other.sign(digest, with: otherKey) }
        try await waitUntil("the other user's use is admitted") { otherAdmission.admittedNow == 1 }
        XCTAssertEqual(flooderAdmission.admittedNow, KeyEngine.usesPerUser, "the flood holds no more than its share")

        release.signal()
        released = true
        try await holder.value
        var refused = 0
        for use in flood {
            switch await use.value {
            case nil: break
            case .notAvailable?: refused += 1
            case let other?: XCTFail("\(other)")
            }
        }
        XCTAssertGreaterThan(refused, 0, "a flood of \(uses) was all queued for the TPM")
        XCTAssertEqual(refused, uses - KeyEngine.usesPerUser, "the flooding user's uses past its share were refused")
        let signature = try await served.value
        XCTAssertTrue(try otherKey.publicKey.isValidSignature(signature, for: digest))
    }

    private struct Timeout: Error, CustomStringConvertible { let description: String }

    /// Polls `condition` for up to ten seconds; fails the test (and stops waiting) past that.
    private func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw Timeout(description: "never: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
