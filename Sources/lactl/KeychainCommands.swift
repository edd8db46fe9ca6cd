import ArgumentParser
import EnclaveProtocol
import Foundation

struct Keychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The calling user's keychain items, of every app: metadata only, never values. Asks for the device passcode.",
        subcommands: [List.self, Why.self, Delete.self])

    static func flagNames(_ flags: UInt64) -> String {
        let names: [(UInt64, String)] = [(1, "userPresence"), (2, "biometryAny"), (8, "biometryCurrentSet"), (16, "devicePasscode"),
                                         (32, "companion"), (1 << 14, "or"), (1 << 15, "and"), (1 << 30, "privateKeyUsage"),
                                         (1 << 31, "applicationPassword")]
        let set = names.filter { flags & $0.0 != 0 }.map(\.1)
        return set.isEmpty ? "none" : set.joined(separator: ",")
    }

    static func listing(_ client: ClientOptions, stdin: Bool) throws -> [KeychainListing] {
        let passcode = try SecretInput.read("Device passcode", fromStdin: stdin)
        guard case .keychainListing(let items) = try client.call(.keychainList(passcode: passcode)) else { throw ExitCode.failure }
        return items
    }

    static func find(_ ref: String, in items: [KeychainListing]) throws -> KeychainListing {
        guard let item = items.first(where: { $0.persistentRef.base64EncodedString() == ref }) else {
            throw ValidationError("no item has the reference \(ref); `lactl keychain list` shows them")
        }
        return item
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List items: app, class, service/server, account, protection, access control.")
        @OptionGroup var client: ClientOptions
        @Flag(help: "Read the passcode from standard input.") var stdin = false
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let items = try Keychain.listing(client, stdin: stdin)
            if json { return printJSON(items) }
            if items.isEmpty { return print("no items") }
            for i in items {
                let name = [i.service ?? i.server, i.account].compactMap { $0 }.joined(separator: " / ")
                print("\(i.persistentRef.base64EncodedString())  \(i.itemClass)  \(name.isEmpty ? "-" : name)  [\(i.protection); \(Keychain.flagNames(i.flags))]  \(i.app)\(i.unusable == nil ? "" : "  UNUSABLE")")
            }
        }
    }

    struct Why: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Say whether an item can be used now, and why not.")
        @OptionGroup var client: ClientOptions
        @Argument(help: "The item's reference, from `lactl keychain list`.") var reference: String
        @Flag(help: "Read the passcode from standard input.") var stdin = false
        func run() throws {
            let item = try Keychain.find(reference, in: try Keychain.listing(client, stdin: stdin))
            print(item.unusable ?? "usable: it asks for \(Keychain.flagNames(item.flags)) at use")
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an item of any of your apps (invalidated items included).")
        @OptionGroup var client: ClientOptions
        @Argument(help: "The item's reference, from `lactl keychain list`.") var reference: String
        @Flag(help: "Read the passcode from standard input.") var stdin = false
        func run() throws {
            guard let ref = Data(base64Encoded: reference) else { throw ValidationError("a reference is base64, as `lactl keychain list` prints it") }
            let passcode = try SecretInput.read("Device passcode", fromStdin: stdin)
            _ = try client.call(.keychainRemove(passcode: passcode, persistentRef: ref))
            print("deleted")
        }
    }
}
