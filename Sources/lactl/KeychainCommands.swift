import ArgumentParser
import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation
import LocalAuthentication

struct Keychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "The calling user's keychain items, of every app: metadata only, never values. Asks for the device passcode.",
        subcommands: [List.self, Why.self, Delete.self, Share.self, Groups.self, Get.self]
    )

    static func listing(_ client: ClientOptions, stdin: Bool) throws -> [KeychainListing] {
        guard case .keychainListing(let items) = try client.administer(.keychainList, stdin: stdin) else {
            throw ExitCode.failure
        }
        return items
    }

    static func find(_ ref: String, in items: [KeychainListing]) throws -> KeychainListing {
        guard let item = items.first(where: { $0.persistentRef.base64EncodedString() == ref }) else {
            throw ValidationError("no item has the reference \(ref); `lactl keychain list` shows them")
        }
        return item
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List items: app, class, service/server, account, protection, access control."
        )
        @OptionGroup var client: ClientOptions
        @Flag(help: "The daemon reads the passcode from standard input (else it asks on this terminal).") var stdin =
            false
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            let items = try Keychain.listing(client, stdin: stdin)
            if json { return printJSON(items) }
            if items.isEmpty { return print("no items") }
            for i in items {
                let name = [i.service ?? i.server, i.account].compactMap { $0 }.joined(separator: " / ")
                print(
                    "\(i.persistentRef.base64EncodedString())  \(Printable.field(i.itemClass))  \(name.isEmpty ? "-" : Printable.field(name))  [\(i.protection); \(i.flags.names)]  \(Printable.field(i.app))\(i.unusable == nil ? "" : "  UNUSABLE")"
                )
            }
        }
    }

    struct Why: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Say whether an item can be used now, and why not.")
        @OptionGroup var client: ClientOptions
        @Argument(help: "The item's reference, from `lactl keychain list`.") var reference: String
        @Flag(help: "The daemon reads the passcode from standard input (else it asks on this terminal).") var stdin =
            false
        func run() throws {
            let item = try Keychain.find(reference, in: try Keychain.listing(client, stdin: stdin))
            print(Printable.escaped(item.unusable ?? "usable: it asks for \(item.flags.names) at use"))
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an item of any of your apps (invalidated items included)."
        )
        @OptionGroup var client: ClientOptions
        @Argument(help: "The item's reference, from `lactl keychain list`.") var reference: String
        @Flag(help: "The daemon reads the passcode from standard input (else it asks on this terminal).") var stdin =
            false
        func run() throws {
            guard let ref = Data(base64Encoded: reference) else {
                throw ValidationError("a reference is base64, as `lactl keychain list` prints it")
            }
            _ = try client.administer(.keychainRemove(.init(persistentRef: ref)), stdin: stdin)
            print("deleted")
        }
    }

    struct Share: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Let apps share keychain items through an access group (kSecAttrAccessGroup). No apps removes the group."
        )
        @OptionGroup var client: ClientOptions
        @Argument(help: "The group's name (not starting with /).") var group: String
        @Argument(help: "Member apps: executable paths, or sandboxed apps (flatpak:APP_ID, snap:NAME).") var apps:
            [String] = []
        @Flag(help: "The daemon reads the passcode from standard input (else it asks on this terminal).") var stdin =
            false
        func run() throws {
            // The daemon knows apps by their canonical executable path (/proc/PID/exe), sandboxed
            // apps by their verified names.
            let members = try apps.map { app in
                guard SandboxIdentity.prefixes.contains(where: app.hasPrefix) else {
                    return URL(fileURLWithPath: app).resolvingSymlinksInPath().path
                }
                guard AppIdentity.isMemberName(app) else {
                    throw ValidationError(
                        "\(app) is no Flatpak app id (flatpak:org.example.App: three or more elements) or snap name (snap:NAME)"
                    )
                }
                return app
            }
            _ = try client.administer(.configureAccessGroup(.init(name: group, apps: members)), stdin: stdin)
            print(
                members.isEmpty
                    ? "removed \(Printable.field(group))"
                    : "\(Printable.field(group)): \(members.map(Printable.field).joined(separator: ", "))"
            )
        }
    }

    struct Groups: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List access groups and their apps.")
        @OptionGroup var client: ClientOptions
        @Flag(help: "The daemon reads the passcode from standard input (else it asks on this terminal).") var stdin =
            false
        @Flag(help: "Print JSON.") var json = false
        func run() throws {
            guard case .accessGroups(let groups) = try client.administer(.accessGroups, stdin: stdin) else {
                throw ExitCode.failure
            }
            if json { return printJSON(groups) }
            if groups.isEmpty { return print("no access groups") }
            for (name, apps) in groups.sorted(by: { $0.key < $1.key }) {
                print("\(Printable.field(name)): \(apps.map(Printable.field).joined(separator: ", "))")
            }
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Print the secret of a generic password that lactl itself may read (its own or a shared group's), asking for the owner as the item demands."
        )
        @OptionGroup var client: ClientOptions
        @Option(help: "kSecAttrService.") var service: String?
        @Option(help: "kSecAttrAccount.") var account: String?
        @Option(help: "kSecAttrAccessGroup.") var group: String?
        @Option(help: "The prompt's reason.") var reason: String = "Read a keychain item"
        func run() throws {
            _ = try client.connection()
            var attributes: [String: KeychainValue] = ["class": .string("genp")]
            if let service { attributes["svce"] = .string(service) }
            if let account { attributes["acct"] = .string(account) }
            if let group { attributes["agrp"] = .string(group) }
            let reply = EnclaveEndpoint.$override.withValue(client.endpoint()) {
                ContextRequests.performKeychain(
                    .copy,
                    KeychainRequest(attributes: attributes, context: "", reason: reason, returnData: true),
                    context: nil
                )
            }
            guard reply.status == KeychainStatus.success, let data = reply.items.first?.data else {
                printError("lactl: \(reply.message ?? "status \(reply.status)") (\(reply.status))")
                throw ExitCode(ExitStatus.refused)
            }
            FileHandle.standardOutput.write(data)
        }
    }
}
