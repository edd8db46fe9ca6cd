import EnclaveProtocol
import Foundation

/// The Secure Enclave key a keychain item holds, read from the item itself: for items stored
/// before the client named it (`KeychainRequest.heldKey`), so the daemon's upgrade can bind them
/// to their keys and deleting the item revokes the key (`KeyHoldingItems`).
public enum HeldKey {
    public static func blob(itemClass: String, attributes: [String: KeychainValue], secret: Data) -> Data? {
        switch itemClass {
        case "keys":
            guard case .string(let token)? = attributes["tkid"], token == KeyHoldingItems.secureEnclaveToken,
                secret.count > 65, secret.first == 0x04
            else { return nil }
            return Data(secret.dropFirst(65))
        case "genp":
            struct RightRecord: Decodable { var keyBlob: Data }
            guard case .string(let service)? = attributes["svce"], service == KeyHoldingItems.rightStoreService,
                case .data(let json)? = attributes["gena"],
                let record = try? JSONDecoder().decode(RightRecord.self, from: json)
            else { return nil }
            return record.keyBlob
        default:
            return nil
        }
    }
}
