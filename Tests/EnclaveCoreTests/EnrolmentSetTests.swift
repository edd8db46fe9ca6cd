import EnclaveCore
import XCTest

/// `EnrolmentSet`: an enrolment changes when its names do, not when their order does.
final class EnrolmentSetTests: XCTestCase {
    func testOnlyADifferentSetOfNamesIsAChange() {
        let table: [(stored: [String], now: [String], changed: Bool)] = [
            ([], [], false),
            (["right-thumb"], ["right-thumb"], false),
            (["right-thumb", "left-index-finger"], ["left-index-finger", "right-thumb"], false),
            (["right-thumb"], ["right-thumb", "left-index-finger"], true),
            (["right-thumb", "left-index-finger"], ["right-thumb"], true),
            (["right-thumb"], ["left-thumb"], true),
            (["right-thumb"], [], true),
            ([], ["right-thumb"], true),
        ]
        for row in table {
            XCTAssertEqual(
                EnrolmentSet.changed(from: row.stored, to: row.now),
                row.changed,
                "\(row.stored) → \(row.now)"
            )
        }
    }
}
