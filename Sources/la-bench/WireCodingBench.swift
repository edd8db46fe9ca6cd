import EnclaveProtocol
import Foundation

/// What the wire's coding costs, in one process with no socket: each of the four codings one
/// `canEvaluatePolicy` does (the client encodes the request, the daemon decodes it, encodes the
/// reply, the client decodes it), and the same for a keychain look-up by attribute and its
/// answer, in JSON and in `BinaryWire`.
///   la-bench wire N
enum WireCodingBench {
    static func run(iterations: Int) {
        let canEvaluate = RequestEnvelope(id: 7, request: .canEvaluate(.init(context: UUID().uuidString, policy: 1)))
        let canEvaluateReply = ReplyEnvelope(
            id: 7,
            reply: .canEvaluate(
                CanEvaluateReply(biometryType: .touchID, error: nil, message: nil, domainState: Data(count: 32))
            )
        )
        let lookUp = RequestEnvelope(
            id: 8,
            request: .keychainCopy(
                KeychainRequest(
                    attributes: ["class": .string("genp"), "svce": .string("bench"), "acct": .string("account-17")],
                    context: UUID().uuidString,
                    returnData: true
                )
            )
        )
        let found = ReplyEnvelope(
            id: 8,
            reply: .keychain(
                KeychainReply(
                    status: .success,
                    items: [KeychainItem(attributes: [:], data: Data(count: 64), persistentRef: nil)]
                )
            )
        )
        print("| message | coding | encode | decode | bytes |")
        print("|---|---|---|---|---|")
        for encoding in WireEncoding.allCases {
            measure("canEvaluate request", canEvaluate, encoding, iterations, RequestEnvelope.decode)
            measure("canEvaluate reply", canEvaluateReply, encoding, iterations, ReplyEnvelope.decode)
            measure("keychain look-up request", lookUp, encoding, iterations, RequestEnvelope.decode)
            measure("keychain look-up reply (64-byte secret)", found, encoding, iterations, ReplyEnvelope.decode)
        }
    }

    private static func measure<T: WireCoded>(
        _ name: String,
        _ value: T,
        _ encoding: WireEncoding,
        _ iterations: Int,
        _ decode: ([UInt8], WireEncoding) throws -> T
    ) {
        let bytes = value.encoded(encoding)
        precondition((try? decode(bytes, encoding)) == value, "\(name) does not come back as it went")
        var sink = 0
        let encoding_ = encoding
        let encodeTime = Bench.time { for _ in 0..<iterations { sink &+= value.encoded(encoding_).count } }
        let decodeTime = Bench.time {
            for _ in 0..<iterations { sink &+= (try? decode(bytes, encoding_)) == nil ? 0 : 1 }
        }
        func µs(_ t: Double) -> String { String(format: "%.2f µs", t / Double(iterations) * 1e6) }
        print("| \(name) | \(encoding.rawValue) | \(µs(encodeTime)) | \(µs(decodeTime)) | \(bytes.count) |")
        if sink == 42 { print("") }
    }
}

protocol WireCoded: Equatable {
    func encoded(_ encoding: WireEncoding) -> [UInt8]
}

extension RequestEnvelope: WireCoded {}
extension ReplyEnvelope: WireCoded {}
