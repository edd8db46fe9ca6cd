import EnclaveCore
import XCTest

/// Whose share of the daemon a connection takes: the account behind its uid.
final class ShareOwnerTests: XCTestCase {
    private let subordinates = SubordinateIDs(
        parsing: """
            alice:100000:65536
            1001:165536:65536
            nobody-here:300000:10
            bob:200000:0
            bob:4294967000:1000
            root:1000000:1000000000
            broken line
            carol:x:10
            :400000:10

            """,
        uidOf: { ["alice": 1000, "bob": 1002, "root": 0][$0] }
    )

    func testSubordinateIDsAreReadAsSubuidWritesThem() {
        XCTAssertEqual(
            subordinates.ranges,
            [
                .init(owner: 1000, first: 100_000, count: 65_536),
                .init(owner: 1001, first: 165_536, count: 65_536),
                .init(owner: 0, first: 1_000_000, count: 1_000_000_000),
            ],
            "an unknown name's, an empty range, one past the last uid and lines that do not parse are left out"
        )
    }

    func testEachConnectionTakesItsOwnersShare() {
        let rows: [(uid: UInt32, loginUID: UInt32?, share: UInt32, why: String)] = [
            (1000, nil, 1000, "a user's own"),
            (1000, 1001, 1000, "a user's is theirs, whoever logged in"),
            (100_000, nil, 1000, "the first of alice's subordinate uids"),
            (165_535, nil, 1000, "the last of them"),
            (165_536, nil, 1001, "the first of uid 1001's"),
            (231_072, nil, 231_072, "past every range: its own"),
            (99_999, nil, 99_999, "before every range: its own"),
            (0, 1000, 1000, "su or sudo run by uid 1000"),
            (0, 0, 0, "root logged in"),
            (0, UInt32.max, 0, "a service: no login"),
            (0, nil, 0, "unreadable"),
            (1_000_000, nil, 1_000_000, "the first container's block of root's range"),
            (1_065_535, nil, 1_000_000, "the same container"),
            (1_065_536, nil, 1_065_536, "the next container: a share of its own, never root's"),
        ]
        for row in rows {
            XCTAssertEqual(
                ShareOwner.of(uid: row.uid, loginUID: row.loginUID, subordinates: subordinates),
                row.share,
                row.why
            )
        }
        XCTAssertEqual(ShareOwner.of(uid: 100_000, loginUID: nil), 100_000, "no ranges: its own")
    }
}
