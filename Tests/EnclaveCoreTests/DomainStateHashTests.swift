import EnclaveCore
import Foundation
import XCTest

final class DomainStateHashTests: XCTestCase {
    let secret = Data(repeating: 0x42, count: 32)

    private func hash(
        app: String = "/usr/bin/a",
        sensor: String = "touchID",
        generation: UInt64 = 1,
        identities: [String] = ["right thumb"],
        secret: Data? = nil
    ) -> Data? {
        DomainStateHash.compute(
            secret: secret ?? self.secret,
            app: app,
            sensor: sensor,
            generation: generation,
            identities: identities
        )
    }

    func testNilWhenNothingEnrolled() {
        XCTAssertNil(hash(identities: []))
        XCTAssertNil(hash(generation: 7, identities: []))
    }

    func testNonNilWhenEnrolled() {
        XCTAssertEqual(hash()?.count, 32)
    }

    func testStableWhenNothingChanges() {
        XCTAssertEqual(hash(), hash())
        XCTAssertEqual(hash(identities: ["a", "b"]), hash(identities: ["b", "a"]), "enrolment order does not matter")
    }

    func testDiffersPerApp() {
        XCTAssertNotEqual(hash(app: "/usr/bin/a"), hash(app: "/usr/bin/b"))
    }

    func testDiffersPerUserSecret() {
        XCTAssertNotEqual(hash(), hash(secret: Data(repeating: 0x43, count: 32)))
    }

    func testChangesWithEnrolment() {
        XCTAssertNotEqual(
            hash(generation: 1, identities: ["thumb"]),
            hash(generation: 2, identities: ["thumb", "index"])
        )
    }

    func testAddThenRemoveYieldsNewValue() {
        let original = hash(generation: 1, identities: ["thumb"])
        let added = hash(generation: 2, identities: ["thumb", "index"])
        let removed = hash(generation: 3, identities: ["thumb"])
        XCTAssertNotNil(removed)
        XCTAssertNotEqual(removed, original, "enrolment history counts, not only the current set")
        XCTAssertNotEqual(removed, added)
    }

    func testFieldBoundariesAreUnambiguous() {
        // Length-prefixing: moving characters between fields must change the value.
        XCTAssertNotEqual(hash(app: "ab", identities: ["c"]), hash(app: "a", identities: ["bc"]))
        XCTAssertNotEqual(hash(identities: ["ab"]), hash(identities: ["a", "b"]))
    }

    func testNewSecretsAreRandom() {
        let a = DomainStateHash.newSecret()
        let b = DomainStateHash.newSecret()
        XCTAssertEqual(a.count, 32)
        XCTAssertNotEqual(a, b)
    }

    /// The memo answers exactly what the hash would, for every change of every input, across apps
    /// and past its bound.
    func testTheMemoAnswersWhatTheHashWouldWhateverChanged() {
        var memo = DomainStateMemo()
        typealias Inputs = (app: String, sensor: String, generation: UInt64, identities: [String], secret: Data)
        let base: Inputs = ("/usr/bin/a", "touchID", 1, ["right thumb"], secret)
        var steps: [Inputs] = [base, base]
        steps.append((base.app, base.sensor, 2, base.identities, base.secret))
        steps.append((base.app, base.sensor, 2, ["left thumb", "right thumb"], base.secret))
        steps.append((base.app, base.sensor, 2, [], base.secret))
        steps.append((base.app, "fprintd", 2, ["left thumb"], base.secret))
        steps.append((base.app, "fprintd", 2, ["left thumb"], Data(repeating: 0x43, count: 32)))
        steps.append(("/usr/bin/b", "fprintd", 2, ["left thumb"], base.secret))
        steps += (0..<(DomainStateMemo.maxApps + 3)).map {
            ("/usr/bin/app\($0)", base.sensor, 1, base.identities, base.secret)
        }
        steps.append(base)
        for s in steps {
            XCTAssertEqual(
                memo.hash(
                    secret: s.secret,
                    app: s.app,
                    sensor: s.sensor,
                    generation: s.generation,
                    identities: s.identities
                ),
                hash(
                    app: s.app,
                    sensor: s.sensor,
                    generation: s.generation,
                    identities: s.identities,
                    secret: s.secret
                ),
                "\(s)"
            )
        }
    }
}
