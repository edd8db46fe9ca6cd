import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// The keychain through the real daemon: Apple's snippets unchanged, access control at use.
final class KeychainTests: XCTestCase {
    private func audit(_ enclave: TestEnclave) throws -> [AuditEntry] {
        guard case .audit(let entries) = try enclave.send(.audit(.init(limit: 100, everyApp: false))) else { return [] }
        return entries
    }

    /// Authorizations that needed the person (a touch or the passcode), and those the context's
    /// earlier authorization answered without a prompt.
    private func authorizations(_ enclave: TestEnclave) throws -> (prompted: Int, silent: Int) {
        let steps = try audit(enclave).filter { $0.operation == "keychain.authorize" }
        return (
            steps.filter { $0.result == "success(biometric)" || $0.result == "success(passcode)" }.count,
            steps.filter { $0.result == "success(contextAuthorized)" }.count
        )
    }

    /// Issue 3's "Done when": the second read in the same logical action does not prompt; after
    /// another finger is enrolled the read fails with the documented invalidation error.
    func testTheAppleSnippetThenAnEnrolmentChangeInvalidatesTheItem() throws {
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        try enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                .biometryCurrentSet,
                nil
            )!
            let context = LAContext()
            context.localizedReason = "Access your password on the keychain"
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrAccount as String: "alice",
                kSecAttrService as String: "example.com",
                kSecAttrAccessControl as String: access,
                kSecUseAuthenticationContext as String: context,
                kSecValueData as String: "s3cret".data(using: .utf8)!,
            ]
            var status = SecItemAdd(add as CFDictionary, nil)
            XCTAssertEqual(status, errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrAccount as String: "alice",
                kSecAttrService as String: "example.com",
                kSecMatchLimit as String: kSecMatchLimitOne,
                kSecUseAuthenticationContext as String: context,
                kSecReturnData as String: true,
            ]
            var item: CFTypeRef?
            status = SecItemCopyMatching(query as CFDictionary, &item)
            XCTAssertEqual(status, errSecSuccess)
            let password = String(data: item as! Data, encoding: .utf8)
            XCTAssertEqual(password, "s3cret")

            // The same logical action reads again: no new prompt (nothing is queued; a prompt would
            // time out and fail).
            var again: CFTypeRef?
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &again), errSecSuccess)
            XCTAssertEqual(again as? Data, Data("s3cret".utf8))
            let steps = try self.authorizations(enclave)
            XCTAssertEqual(steps.prompted, 1, "one prompt for the logical action")
            XCTAssertEqual(steps.silent, 1, "the second read rode on the context's authorization")

            try enclave.enroll("left-thumb")
            var stale: CFTypeRef?
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &stale), errSecInvalidItemRef)
            XCTAssertNil(stale)
            XCTAssertTrue((SecCopyErrorMessageString(errSecInvalidItemRef, nil)! as String).contains("no longer valid"))
            // Deleting it still works.
            XCTAssertEqual(
                SecItemDelete(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice"] as CFDictionary
                ),
                errSecSuccess
            )
        }
    }

    func testBiometryAnySurvivesAnEnrolmentChange() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                .biometryAny,
                nil
            )!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bob",
                        kSecAttrAccessControl as String: access, kSecValueData as String: Data("pin".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            try enclave.enroll("left-thumb")
            try enclave.queue(.match)
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bob",
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            XCTAssertEqual(item as? Data, Data("pin".utf8))
        }
    }

    func testEachAccessControlFlagAtUse() throws {
        let enclave = try TestEnclave(.with { $0.promptTimeout = 2 })
        try enclave.run {
            func add(_ account: String, _ flags: SecAccessControlCreateFlags) {
                let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil)!
                XCTAssertEqual(
                    SecItemAdd(
                        [
                            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                            kSecAttrAccessControl as String: access, kSecValueData as String: Data(account.utf8),
                        ] as CFDictionary,
                        nil
                    ),
                    errSecSuccess,
                    account
                )
            }
            func read(_ account: String, _ events: [TestEnclave.Event]) throws -> OSStatus {
                try enclave.clearQueue()
                try enclave.queue(events)
                var item: CFTypeRef?
                let status = SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                )
                if status == errSecSuccess { XCTAssertEqual(item as? Data, Data(account.utf8)) }
                return status
            }
            add("presence", .userPresence)
            add("biometry", .biometryAny)
            add("passcode", .devicePasscode)
            add("either", [.biometryAny, .or, .devicePasscode])
            add("both", [.biometryAny, .and, .devicePasscode])
            add("plain", [])
            XCTAssertEqual(try read("plain", []), errSecSuccess, "no constraint, no prompt")
            XCTAssertEqual(try read("presence", [.match]), errSecSuccess)
            XCTAssertEqual(try read("presence", [.passcode("1234")]), errSecSuccess, "the passcode serves userPresence")
            XCTAssertEqual(
                try read("biometry", [.passcode("1234"), .cancel]),
                errSecUserCanceled,
                "biometry only: a passcode does not count"
            )
            XCTAssertEqual(try read("biometry", [.nomatch, .nomatch, .nomatch]), errSecAuthFailed)
            XCTAssertEqual(
                try read("passcode", [.match, .passcode("1234")]),
                errSecSuccess,
                "devicePasscode: the touch is ignored"
            )
            XCTAssertEqual(try read("passcode", [.match, .cancel]), errSecUserCanceled)
            XCTAssertEqual(try read("either", [.match]), errSecSuccess)
            XCTAssertEqual(try read("both", [.match, .passcode("1234")]), errSecSuccess, "and: both factors")
            XCTAssertEqual(try read("both", [.match, .cancel]), errSecUserCanceled, "and: a match alone is not enough")
        }
    }

    func testInteractionNotAllowedAndSkip() throws {
        let enclave = try TestEnclave()
        enclave.run {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "locked",
                        kSecAttrAccessControl as String: access, kSecValueData as String: Data("x".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "open",
                        kSecValueData as String: Data("y".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            let quiet = LAContext()
            quiet.interactionNotAllowed = true
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "locked",
                        kSecUseAuthenticationContext as String: quiet, kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecInteractionNotAllowed
            )
            var all: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
                        kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
                        kSecReturnAttributes as String: true, kSecReturnData as String: true,
                    ] as CFDictionary,
                    &all
                ),
                errSecSuccess
            )
            let items = all as? [[String: Any]] ?? []
            XCTAssertEqual(
                items.compactMap { $0[kSecAttrAccount as String] as? String },
                ["open"],
                "items that would prompt are skipped"
            )
            // Attributes alone need no authentication.
            var attributes: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "locked",
                        kSecReturnAttributes as String: true,
                    ] as CFDictionary,
                    &attributes
                ),
                errSecSuccess
            )
            XCTAssertEqual(
                (attributes as? [String: Any])?[kSecAttrAccessible as String] as? String,
                kSecAttrAccessibleWhenUnlocked as String
            )
        }
    }

    func testStatusCodesForDuplicatesMissingItemsAndBadInput() throws {
        let enclave = try TestEnclave()
        enclave.run {
            let add: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "carol", kSecAttrPort as String: 443,
                kSecValueData as String: Data("pw".utf8),
            ]
            XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
            XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecDuplicateItem)
            var other = add
            other[kSecAttrPort as String] = 8443
            XCTAssertEqual(
                SecItemAdd(other as CFDictionary, nil),
                errSecSuccess,
                "the port is part of an internet password's identity"
            )
            // Not synchronizable is one value, said or not (it was two: a second item beside the first).
            var unsaid = add
            unsaid[kSecAttrSynchronizable as String] = false
            XCTAssertEqual(SecItemAdd(unsaid as CFDictionary, nil), errSecDuplicateItem)
            unsaid[kSecAttrSynchronizable as String] = 0
            XCTAssertEqual(SecItemAdd(unsaid as CFDictionary, nil), errSecDuplicateItem)
            var none: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "nowhere"]
                        as CFDictionary,
                    &none
                ),
                errSecItemNotFound
            )
            XCTAssertEqual(
                SecItemDelete(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "nobody"] as CFDictionary
                ),
                errSecItemNotFound
            )
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccessGroup as String: "com.other.app",
                        kSecValueData as String: Data(),
                    ] as CFDictionary,
                    nil
                ),
                errSecMissingEntitlement
            )
            XCTAssertEqual(SecItemAdd([kSecAttrAccount as String: "no class"] as CFDictionary, nil), errSecParam)
            // Update, then read back.
            XCTAssertEqual(
                SecItemUpdate(
                    [
                        kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                        kSecAttrPort as String: 443,
                    ] as CFDictionary,
                    [kSecValueData as String: Data("new".utf8), kSecAttrLabel as String: "work"] as CFDictionary
                ),
                errSecSuccess
            )
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassInternetPassword, kSecAttrLabel as String: "work",
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            XCTAssertEqual(item as? Data, Data("new".utf8))
        }
    }

    func testWhenPasscodeSetItemsNeedAndFollowThePasscode() throws {
        let noPasscode = try TestEnclave(.with { $0.passcode = nil })
        noPasscode.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                        kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                        kSecValueData as String: Data(),
                    ] as CFDictionary,
                    nil
                ),
                errSecAuthFailed
            )
        }
        let enclave = try TestEnclave()
        try enclave.run {
            for (account, accessible) in [
                ("bound", kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly),
                ("kept", kSecAttrAccessibleAfterFirstUnlock),
            ] {
                XCTAssertEqual(
                    SecItemAdd(
                        [
                            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                            kSecAttrAccessible as String: accessible, kSecValueData as String: Data(),
                        ] as CFDictionary,
                        nil
                    ),
                    errSecSuccess
                )
            }
            try enclave.removePasscode(current: "1234")
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bound"] as CFDictionary,
                    &item
                ),
                errSecItemNotFound
            )
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "kept"] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
        }
    }

    /// Adds the item "vault", locked with the application password "app-pw" (inside `enclave.run`).
    private func addVault() {
        let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil)!
        let context = LAContext()
        context.setCredential(Data("app-pw".utf8), type: .applicationPassword)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault",
                    kSecAttrAccessControl as String: access, kSecUseAuthenticationContext as String: context,
                    kSecValueData as String: Data("inner".utf8),
                ] as CFDictionary,
                nil
            ),
            errSecSuccess
        )
    }

    /// Reads "vault" with `password` as the context's application password (inside `enclave.run`).
    private func readVault(_ password: String?) -> OSStatus {
        let c = LAContext()
        if let password { c.setCredential(Data(password.utf8), type: .applicationPassword) }
        var item: CFTypeRef?
        return SecItemCopyMatching(
            [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault",
                kSecUseAuthenticationContext as String: c, kSecReturnData as String: true,
            ] as CFDictionary,
            &item
        )
    }

    func testApplicationPassword() throws {
        let enclave = try TestEnclave()
        enclave.run {
            addVault()
            XCTAssertEqual(readVault("app-pw"), errSecSuccess)
            XCTAssertEqual(readVault("wrong"), errSecAuthFailed)
            XCTAssertEqual(readVault(nil), errSecAuthFailed)
        }
    }

    /// Guessing an item's application password: five wrong ones, then entry for that item is
    /// delayed — the right password too, until the delay is over — and the count survives a
    /// restart. Before, every guess was checked, as fast as the daemon answered.
    func testWrongApplicationPasswordsAreCountedAndDelayed() throws {
        let enclave = try TestEnclave()
        enclave.run { addVault() }
        for guess in 0..<5 { XCTAssertEqual(enclave.run { readVault("guess-\(guess)") }, errSecAuthFailed) }
        XCTAssertEqual(
            enclave.run { readVault("app-pw") },
            errSecAuthFailed,
            "the right password passed during the delay: guessing was free"
        )
        try enclave.restart()
        XCTAssertEqual(enclave.run { readVault("app-pw") }, errSecAuthFailed, "the delay survives a restart")
    }

    func testTwoAppsAndTwoDaemonsCannotSeeEachOthersItems() throws {
        let enclave = try TestEnclave()
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "mine",
                        kSecValueData as String: Data("secret".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        // Another app (lactl, a different executable) asks through the raw protocol for the same item.
        let lactl = productPath("lactl")
        let other = try runProcess(lactl, ["status", "--json", "--socket", enclave.socketPath])
        XCTAssertEqual(other.status, 0)
        let c = try EnclaveConnection(socketPath: enclave.socketPath)
        defer { c.close() }
        guard
            case .keychain(let mine) = try c.request(
                .keychainCopy(
                    KeychainRequest(
                        attributes: ["class": .string("genp"), "acct": .string("mine")],
                        context: "k",
                        returnData: true
                    )
                )
            )
        else { return XCTFail() }
        XCTAssertEqual(mine.status, .success, "the same app sees its item")
        // A raw request claiming another app's access group sees nothing.
        guard
            case .keychain(let claimed) = try c.request(
                .keychainCopy(
                    KeychainRequest(
                        attributes: ["class": .string("genp"), "agrp": .string(lactl)],
                        context: "k2",
                        returnData: true
                    )
                )
            )
        else { return XCTFail() }
        XCTAssertEqual(claimed.status, .itemNotFound)
    }

    func testItemsSurviveASIGKILLDuringWrites() throws {
        let enclave = try TestEnclave()
        var committed: [String] = []
        for round in 0..<8 {
            enclave.run {
                for i in 0..<10 {
                    let account = "r\(round)-\(i)"
                    if SecItemAdd(
                        [
                            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                            kSecValueData as String: Data(account.utf8),
                        ] as CFDictionary,
                        nil
                    ) == errSecSuccess {
                        committed.append(account)
                    }
                }
            }
            enclave.kill()
            try enclave.start()
        }
        enclave.run {
            var all: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
                        kSecReturnAttributes as String: true, kSecReturnData as String: true,
                    ] as CFDictionary,
                    &all
                ),
                errSecSuccess
            )
            let items = all as? [[String: Any]] ?? []
            XCTAssertEqual(Set(items.compactMap { $0[kSecAttrAccount as String] as? String }), Set(committed))
            for item in items {
                XCTAssertEqual(
                    item[kSecValueData as String] as? Data,
                    (item[kSecAttrAccount as String] as? String).map { Data($0.utf8) }
                )
            }
        }
    }

    func testTheStateDirectoryAloneDecryptsNothing() throws {
        let enclave = try TestEnclave()
        let secret = "correct horse battery staple"
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "x",
                        kSecValueData as String: Data(secret.utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        enclave.stop()
        for file in try FileManager.default.contentsOfDirectory(atPath: enclave.stateDirectory) {
            let bytes = FileManager.default.contents(atPath: enclave.stateDirectory + "/" + file) ?? Data()
            XCTAssertNil(bytes.range(of: Data(secret.utf8)), "\(file) holds the secret in clear")
        }
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: enclave.stateDirectory + "/master.key"),
            "the key lives elsewhere"
        )
    }
}
