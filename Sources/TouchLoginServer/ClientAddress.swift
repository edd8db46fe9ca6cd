import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 address as bytes (4 or 16), read with `inet_pton`; an IPv4-mapped IPv6
/// address (`::ffff:192.0.2.1`) is the IPv4 address it maps.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(_ text: some StringProtocol) {
        var text = String(text)
        // a zone index names an interface, not a host
        if let percent = text.firstIndex(of: "%") { text = String(text[..<percent]) }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            let all = withUnsafeBytes(of: &v6) { Array($0) }
            bytes = all[0..<12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] ? Array(all[12...]) : all
        } else {
            return nil
        }
    }

    public var isIPv6: Bool { bytes.count == 16 }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var copy = bytes
        _ = inet_ntop(isIPv6 ? AF_INET6 : AF_INET, &copy, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// What limits are kept per: the address itself for IPv4, its /64 for IPv6 — one host
    /// usually holds a whole /64, so counting single IPv6 addresses would count nothing.
    public var limitKey: String {
        guard isIPv6 else { return description }
        return (IPAddress(bytes: Array(bytes[0..<8]) + [UInt8](repeating: 0, count: 8))?.description ?? description)
            + "/64"
    }

    init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }
}

/// A network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`; a bare address is its own /32 or /128).
public struct IPNetwork: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    public let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1)
        guard let address = parts.first.flatMap({ IPAddress($0) }) else { return nil }
        let bits = address.bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard let given = Int(parts[1]) else { return nil }
            // An IPv4-mapped network keeps its meaning: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
            length = (address.bytes.count == 4 && text.contains(":")) ? given - 96 : given
            guard (0...bits).contains(length) else { return nil }
        }
        self.address = address
        prefixLength = length
    }

    public func contains(_ other: IPAddress) -> Bool {
        guard other.bytes.count == address.bytes.count else { return false }
        var remaining = prefixLength
        for (a, b) in zip(address.bytes, other.bytes) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
            if a & mask != b & mask { return false }
            remaining -= 8
        }
        return true
    }

    public var description: String { "\(address)/\(prefixLength)" }
}

/// Who the client is: the peer the kernel reports, unless that peer is a proxy the operator
/// trusts — then the address that proxy (and any trusted proxy before it) forwarded, read from the
/// right of the one header the proxies write (`header`). Headers from any other peer are ignored,
/// and so is the other header even from a trusted proxy: a proxy that appends one passes the
/// other on as the client sent it, so reading it would let a client choose its own bucket.
public struct ClientAddress: Sendable {
    /// The header the trusted proxies write.
    public enum Header: String, Sendable, CaseIterable {
        /// `X-Forwarded-For`: what nginx (`proxy_add_x_forwarded_for`), HAProxy (`option
        /// forwardfor`), Caddy, Traefik and the common cloud balancers append. Our default.
        case xForwardedFor = "x-forwarded-for"
        /// `Forwarded` (RFC 7239), for proxies set up to write it.
        case forwarded
    }

    public var trustedProxies: [IPNetwork]
    public var header: Header

    public init(trustedProxies: [IPNetwork] = [], header: Header = .xForwardedFor) {
        self.trustedProxies = trustedProxies
        self.header = header
    }

    func isTrusted(_ address: IPAddress) -> Bool { trustedProxies.contains { $0.contains(address) } }

    /// `forwarded` and `xForwardedFor`: every value of each header, in the order received.
    public func resolve(peer: IPAddress?, forwarded: [String], xForwardedFor: [String]) -> IPAddress? {
        guard var client = peer, isTrusted(client) else { return peer }
        let chain = header == .forwarded ? Self.forwardedFor(forwarded) : Self.xForwardedFor(xForwardedFor)
        for hop in chain.reversed() {
            guard let address = hop else { break }  // unreadable or obfuscated: the last trusted hop stands
            client = address
            if !isTrusted(address) { break }
        }
        return client
    }

    /// Whether a trusted proxy sent the header this does not read and not the one it does: most
    /// likely proxies set up for the other one, which leaves every client behind them in the
    /// proxy's own bucket (worth telling the operator).
    public func sentOnlyTheOtherHeader(peer: IPAddress?, forwarded: [String], xForwardedFor: [String]) -> Bool {
        guard let peer, isTrusted(peer) else { return false }
        switch header {
        case .xForwardedFor: return xForwardedFor.isEmpty && !forwarded.isEmpty
        case .forwarded: return forwarded.isEmpty && !xForwardedFor.isEmpty
        }
    }

    static func xForwardedFor(_ values: [String]) -> [IPAddress?] {
        values.flatMap { $0.split(separator: ",") }.map { hostAddress($0) }
    }

    static func forwardedFor(_ values: [String]) -> [IPAddress?] {
        values.flatMap { $0.split(separator: ",") }.compactMap { element -> IPAddress?? in
            for pair in element.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "for" else {
                    continue
                }
                return .some(hostAddress(parts[1]))
            }
            return nil  // an element without for= names no hop
        }
    }

    /// `192.0.2.1`, `"192.0.2.1:4711"`, `"[2001:db8::1]:4711"`, `2001:db8::1`.
    static func hostAddress(_ raw: Substring) -> IPAddress? {
        var text = raw.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = String(text.dropFirst().dropLast()) }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            return IPAddress(text[text.index(after: text.startIndex)..<close])
        }
        if text.filter({ $0 == ":" }).count == 1 { text = String(text.prefix { $0 != ":" }) }  // IPv4 with a port
        return IPAddress(text)
    }
}
