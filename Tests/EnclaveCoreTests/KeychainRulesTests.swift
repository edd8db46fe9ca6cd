import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// `KeychainRules` and `CreationProblem`: what an add, an update and a query may carry.
final class KeychainRulesTests: XCTestCase {
    private let base: [String: KeychainValue] = [
        "class": .string("genp"), "svce": .string("s"), "acct": .string("a"), "v_Data": .data(Data([1, 2])),
    ]

    private func addStatus(_ a: [String: KeychainValue], _ ac: AccessControlValue? = nil) -> KeychainStatus? {
        do {
            _ = try KeychainRules.newItem(a, accessControl: ac)
            return nil
        } catch { return error.status }
    }

    func testAddRefusals() {
        func with(_ key: String, _ value: KeychainValue?) -> [String: KeychainValue] {
            var a = base
            a[key] = value
            return a
        }
        let table: [([String: KeychainValue], AccessControlValue?, KeychainStatus?, String)] = [
            (base, nil, nil, "a plain generic password"),
            (with("class", nil), nil, .param, "no class"),
            (with("class", .int(1)), nil, .param, "class not a string"),
            (with("class", .string("cert")), nil, .unimplemented, "certificates"),
            (with("class", .string("idnt")), nil, .unimplemented, "identities"),
            (with("class", .string("nope")), nil, .param, "unknown class"),
            (with("zzzz", .string("x")), nil, .param, "unknown attribute"),
            (with("pdmn", .string("nope")), nil, .param, "unknown accessibility"),
            (with("pdmn", .int(1)), nil, .param, "accessibility not a string"),
            (with("v_Data", .string("x")), nil, .param, "value not data"),
            (with("labl", .string(String(repeating: "x", count: 4097))), nil, .param, "attribute over 4 KiB"),
            (with("gena", .data(Data(count: 4097))), nil, .param, "data attribute over 4 KiB"),
            (with("v_Data", .data(Data(count: 60_000))), nil, nil, "the value has no 4 KiB limit"),
            (
                with("sync", .bool(true)), AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: []),
                .param, "synchronizable ThisDeviceOnly"
            ),
            (
                with("sync", .bool(true)), AccessControlValue(protection: .whenUnlocked, flags: []), nil,
                "synchronizable, not bound to the device"
            ),
            (
                with("sync", .string("syna")), AccessControlValue(protection: .whenUnlocked, flags: []), .param,
                "Any is for queries"
            ),
            (
                base, AccessControlValue(protection: .whenUnlocked, flags: [.and, .or, .devicePasscode]), .param,
                "and with or"
            ),
            (
                base, AccessControlValue(protection: .whenUnlocked, flags: AccessControlFlags(rawValue: 1 << 7)),
                .param, "unknown flag bits"
            ),
        ]
        for (a, ac, status, why) in table { XCTAssertEqual(addStatus(a, ac), status, why) }
    }

    func testAddChoosesTheProtection() throws {
        XCTAssertEqual(
            try KeychainRules.newItem(base, accessControl: nil).protection,
            .whenUnlocked,
            "the default, as on Apple"
        )
        var a = base
        a["pdmn"] = .string("cku")
        XCTAssertEqual(try KeychainRules.newItem(a, accessControl: nil).protection, .afterFirstUnlockThisDeviceOnly)
        let ac = AccessControlValue(protection: .whenPasscodeSetThisDeviceOnly, flags: .biometryCurrentSet)
        let item = try KeychainRules.newItem(base, accessControl: ac)
        XCTAssertEqual(item.protection, .whenPasscodeSetThisDeviceOnly, "the access control's protection wins")
        XCTAssertEqual(item.flags, .biometryCurrentSet)
        XCTAssertEqual(item.secret, Data([1, 2]))
        XCTAssertNil(item.attributes["v_Data"], "the value is not an attribute")
        XCTAssertEqual(item.itemClass, "genp")
    }

    func testUpdateRefusals() {
        let table: [([String: KeychainValue], KeychainStatus?, String)] = [
            (["labl": .string("new")], nil, ""),
            (["v_Data": .data(Data([9]))], nil, "a new secret"),
            (["class": .string("inet")], .param, "class"),
            (["pdmn": .string("ak")], .param, "kept by the keychain"),
            (["cdat": .date(Date())], .param, ""),
            (["mdat": .date(Date())], .param, ""),
            (["agrp": .string("g")], .param, "another access group"),
            (["v_PersistentRef": .data(Data([1]))], .param, ""),
            (["v_Data": .int(1)], .param, "value not data"),
            (["bogus": .int(1)], .param, "unknown attribute"),
            (["labl": .string(String(repeating: "x", count: 4097))], .param, "over 4 KiB"),
        ]
        for (changes, status, why) in table {
            var got: KeychainStatus?
            do { _ = try KeychainRules.changes(changes, accessControl: nil) } catch { got = error.status }
            XCTAssertEqual(got, status, why)
        }
        let changes = try? KeychainRules.changes(
            ["v_Data": .data(Data([9])), "labl": .string("l")],
            accessControl: AccessControlValue(protection: .whenUnlocked, flags: .userPresence)
        )
        XCTAssertEqual(changes?.secret, Data([9]))
        XCTAssertEqual(changes?.attributes, ["labl": .string("l")])
        XCTAssertEqual(changes?.requirement?.steps, [.owner])
    }

    func testQueriesMatchEveryAttribute() throws {
        let stored: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("s"), "acct": .string("a"), "labl": .string("L"),
            "agrp": .string("g"),
        ]
        func matches(_ query: [String: KeychainValue]) throws -> Bool {
            try KeychainRules.IndexedQuery(query.merging(["class": .string("genp")]) { asked, _ in asked }).matches(
                stored
            )
        }
        XCTAssertTrue(try matches(["svce": .string("s")]))
        XCTAssertTrue(
            try matches(["svce": .string("s"), "acct": .string("a"), "agrp": .string("g"), "labl": .string("L")])
        )
        XCTAssertTrue(
            try matches(["v_PersistentRef": .data(Data([1]))]),
            "the persistent reference is the storage's to match"
        )
        XCTAssertFalse(try matches(["class": .string("inet")]), "another class")
        XCTAssertFalse(try matches(["svce": .string("s"), "labl": .string("other")]))
        XCTAssertFalse(try matches(["svce": .string("t")]), "another service")
        XCTAssertFalse(try matches(["agrp": .string("h")]), "another access group")
        XCTAssertFalse(try matches(["svce": .data(Data("s".utf8))]), "a service as data is not the string")
        XCTAssertFalse(try matches(["gena": .data(Data())]), "an attribute the item lacks")
        XCTAssertThrowsError(try KeychainRules.persistentRef(["v_PersistentRef": .string("x")]))
    }

    /// Apple's rule for kSecAttrSynchronizable in a query: absent or false finds only items that
    /// are not synchronizable, true only those that are, kSecAttrSynchronizableAny both.
    func testSynchronizableInQueries() throws {
        let plain: [String: KeychainValue] = ["class": .string("genp"), "svce": .string("s")]
        var synced = plain
        synced["sync"] = .bool(true)
        var unsynced = plain
        unsynced["sync"] = .bool(false)
        let table: [([String: KeychainValue], KeychainValue?, Bool, String)] = [
            (plain, nil, true, "absent finds an item stored without it"),
            (unsynced, nil, true, "absent finds an item stored as false"),
            (synced, nil, false, "absent does not find a synchronizable item"),
            (plain, .bool(false), true, "false finds an item stored without it"),
            (synced, .bool(false), false, "false does not find a synchronizable item"),
            (synced, .bool(true), true, "true finds a synchronizable item"),
            (plain, .bool(true), false, "true does not find an item stored without it"),
            (synced, .int(1), true, "1 is true"),
            (synced, .string("syna"), true, "Any finds a synchronizable item"),
            (plain, .string("syna"), true, "Any finds an item stored without it"),
            (unsynced, .string("syna"), true, "Any finds an item stored as false"),
        ]
        for (stored, sync, expected, why) in table {
            var query: [String: KeychainValue] = ["class": .string("genp"), "svce": .string("s")]
            query["sync"] = sync
            XCTAssertEqual(try KeychainRules.IndexedQuery(query).matches(stored), expected, why)
        }
    }

    /// Which parts of a query the storage's columns answer, and what is left to an item's
    /// attributes: only string values go to the columns; the class, the value keys and `sync`
    /// never stay.
    func testIndexedQuerySplitsColumnsFromAttributes() throws {
        let genp: [String: KeychainValue] = ["class": .string("genp")]
        func query(_ extra: [String: KeychainValue]) -> [String: KeychainValue] {
            genp.merging(extra) { _, new in new }
        }
        let table:
            [([String: KeychainValue], String?, String?, String?, Data?, Bool?, [String: KeychainValue], String)] = [
                (
                    query([:]), nil, nil, nil, nil, false, [:],
                    "the class alone; not synchronizable, as Apple reads an absent sync"
                ),
                (
                    query(["svce": .string("s"), "acct": .string("a")]), "s", "a", nil, nil, false, [:],
                    "service and account: the columns answer it all"
                ),
                (
                    query(["srvr": .string("h"), "v_Data": .data(Data([1]))]), nil, nil, "h", nil, false, [:],
                    "the value keys are not attributes"
                ),
                (
                    query(["v_PersistentRef": .data(Data([7]))]), nil, nil, nil, Data([7]), false, [:],
                    "a persistent reference"
                ),
                (
                    query(["svce": .data(Data([1]))]), nil, nil, nil, nil, false, ["svce": .data(Data([1]))],
                    "a service that is not a string is matched on attributes"
                ),
                (
                    query(["acct": .string("a"), "labl": .string("L")]), nil, "a", nil, nil, false,
                    ["labl": .string("L")], "a label is not a column"
                ),
                (query(["sync": .bool(true)]), nil, nil, nil, nil, true, [:], "true"),
                (query(["sync": .int(0)]), nil, nil, nil, nil, false, [:], "0 is false"),
                (query(["sync": .string("syna")]), nil, nil, nil, nil, nil, [:], "kSecAttrSynchronizableAny: either"),
                (query(["agrp": .string("g")]), nil, nil, nil, nil, false, [:], "a string access group is a column"),
                (
                    query(["agrp": .int(1)]), nil, nil, nil, nil, false, ["agrp": .int(1)],
                    "an access group that is not a string is left (and matches nothing)"
                ),
            ]
        for (q, service, account, server, ref, sync, remaining, why) in table {
            let indexed = try KeychainRules.IndexedQuery(q)
            XCTAssertEqual(indexed.itemClass, "genp", why)
            XCTAssertEqual(indexed.service, service, why)
            XCTAssertEqual(indexed.account, account, why)
            XCTAssertEqual(indexed.server, server, why)
            XCTAssertEqual(indexed.persistentRef, ref, why)
            XCTAssertEqual(indexed.synchronizable, sync, why)
            XCTAssertEqual(indexed.remaining, remaining, why)
        }
        XCTAssertEqual(try KeychainRules.IndexedQuery(query(["agrp": .string("g")])).accessGroup, "g")
        XCTAssertNil(try KeychainRules.IndexedQuery(query(["agrp": .int(1)])).accessGroup)
        for (bad, status) in [
            ([String: KeychainValue](), KeychainStatus.param), (query(["bogus": .int(1)]), .param),
            (query(["v_PersistentRef": .string("x")]), .param), (["class": .string("cert")], .unimplemented),
        ] {
            XCTAssertThrowsError(try KeychainRules.IndexedQuery(bad)) {
                XCTAssertEqual(($0 as? KeychainFailure)?.status, status, "\(bad)")
            }
        }
        let labelled = try KeychainRules.IndexedQuery(query(["labl": .string("L")]))
        XCTAssertTrue(labelled.remainingMatch(["labl": .string("L"), "acct": .string("x")]))
        XCTAssertFalse(labelled.remainingMatch(["labl": .string("M")]))
        XCTAssertFalse(labelled.remainingMatch([:]), "an attribute the item lacks")
    }

    func testCreationRules() throws {
        let bound = try AccessRequirement(flags: .biometryCurrentSet)
        let password = try AccessRequirement(flags: .applicationPassword)
        let none = try AccessRequirement(flags: [])
        let table: [(Protection, AccessRequirement, Bool, Bool, Bool, CreationProblem?)] = [
            (.whenUnlocked, none, false, false, false, nil),
            (.whenPasscodeSetThisDeviceOnly, none, false, true, false, .passcodeNeeded),
            (.whenPasscodeSetThisDeviceOnly, none, true, false, false, nil),
            (.whenUnlocked, bound, true, false, false, .enrolmentNeeded),
            (.whenUnlocked, bound, true, true, false, nil),
            (.whenUnlocked, password, true, true, false, .applicationPasswordNeeded),
            (.whenUnlocked, password, true, true, true, nil),
            (.whenPasscodeSetThisDeviceOnly, bound, false, false, false, .passcodeNeeded),
        ]
        for (protection, requirement, passcode, enrolled, given, problem) in table {
            XCTAssertEqual(
                CreationProblem.check(
                    protection: protection,
                    requirement: requirement,
                    passcodeSet: passcode,
                    enrolled: enrolled,
                    applicationPasswordGiven: given
                ),
                problem,
                "\(protection) \(requirement)"
            )
        }
        XCTAssertEqual(KeychainFailure(.enrolmentNeeded).status, .authFailed)
    }
}
