import TouchLoginServer
import XCTest

final class ClientAddressTests: XCTestCase {
    func testAddressesAndTheirLimitKeys() {
        let table: [(text: String, key: String?)] = [
            ("192.0.2.7", "192.0.2.7"), ("::ffff:192.0.2.7", "192.0.2.7"),
            ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"), ("2001:db8:1:2::ffff", "2001:db8:1:2::/64"),
            ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
            ("fe80::1%eth0", "fe80::/64"), ("unknown", nil), ("192.0.2.300", nil), ("", nil),
        ]
        for row in table { XCTAssertEqual(IPAddress(row.text)?.limitKey, row.key, row.text) }
    }

    func testNetworks() {
        let table: [(network: String, address: String, contains: Bool)] = [
            ("10.0.0.0/8", "10.200.1.1", true), ("10.0.0.0/8", "11.0.0.1", false), ("192.0.2.1", "192.0.2.1", true),
            ("192.0.2.1", "192.0.2.2", false),
            ("2001:db8::/32", "2001:db8:ffff::1", true), ("2001:db8::/32", "2001:db9::1", false),
            ("10.0.0.0/8", "2001:db8::1", false),
            ("0.0.0.0/0", "203.0.113.9", true), ("::ffff:10.0.0.0/104", "10.1.2.3", true),
            ("172.16.0.0/12", "172.31.255.255", true), ("172.16.0.0/12", "172.32.0.0", false),
        ]
        for row in table {
            XCTAssertEqual(
                IPNetwork(row.network)!.contains(IPAddress(row.address)!),
                row.contains,
                "\(row.network) ∋ \(row.address)"
            )
        }
        for bad in ["10.0.0.0/33", "2001:db8::/129", "nothing/8", "10.0.0.0/x"] { XCTAssertNil(IPNetwork(bad), bad) }
    }

    /// A proxy that appends `X-Forwarded-For` (nginx's `proxy_add_x_forwarded_for`, HAProxy's
    /// `forwardfor`) passes the client's own `Forwarded` header through untouched: read, it would
    /// let the client name any address, and so any bucket.
    func testAClientCannotNameItselfThroughAHeaderItsProxyPassesOn() {
        let proxy = IPAddress("10.0.0.1")
        let client = "203.0.113.5"
        let claimed = ["for=198.51.100.99"]
        let xff = ClientAddress(trustedProxies: [IPNetwork("10.0.0.0/8")!])
        XCTAssertEqual(
            xff.resolve(peer: proxy, forwarded: claimed, xForwardedFor: [client])?.description,
            client,
            "the proxy writes X-Forwarded-For (the default): a Forwarded header is the client's own"
        )
        let rfc = ClientAddress(trustedProxies: [IPNetwork("10.0.0.0/8")!], header: .forwarded)
        XCTAssertEqual(
            rfc.resolve(peer: proxy, forwarded: ["for=\(client)"], xForwardedFor: ["198.51.100.99"])?.description,
            client,
            "the proxy writes Forwarded: an X-Forwarded-For header is the client's own"
        )
    }

    /// What the server warns its operator of once: a trusted proxy writing the other header.
    func testAProxySendingOnlyTheOtherHeaderIsNoticed() {
        let proxies = [IPNetwork("10.0.0.0/8")!]
        let proxy = IPAddress("10.0.0.1")
        let stranger = IPAddress("203.0.113.5")
        let table: [(ClientAddress.Header, IPAddress?, [String], [String], Bool)] = [
            (.xForwardedFor, proxy, ["for=198.51.100.1"], [], true),
            // the client's own Forwarded beside the proxy's header
            (.xForwardedFor, proxy, ["for=198.51.100.1"], ["198.51.100.1"], false),
            (.xForwardedFor, proxy, [], [], false),
            (.xForwardedFor, stranger, ["for=198.51.100.1"], [], false),  // not a proxy: its headers mean nothing
            (.forwarded, proxy, [], ["198.51.100.1"], true),
            (.forwarded, proxy, ["for=198.51.100.1"], ["198.51.100.1"], false),
        ]
        for (header, peer, forwarded, xff, noticed) in table {
            let resolver = ClientAddress(trustedProxies: proxies, header: header)
            XCTAssertEqual(
                resolver.sentOnlyTheOtherHeader(peer: peer, forwarded: forwarded, xForwardedFor: xff),
                noticed,
                "\(header) \(String(describing: peer)) \(forwarded) \(xff)"
            )
        }
    }

    func testOnlyATrustedProxyNamesTheClient() {
        let proxies = [IPNetwork("127.0.0.1")!, IPNetwork("10.0.0.0/8")!]
        func resolve(_ peer: String, forwarded: [String] = [], xff: [String] = []) -> String? {
            // Whichever header the proxies write: the row gives only that one.
            let resolver = ClientAddress(
                trustedProxies: proxies,
                header: forwarded.isEmpty ? .xForwardedFor : .forwarded
            )
            return resolver.resolve(peer: IPAddress(peer), forwarded: forwarded, xForwardedFor: xff)?.description
        }
        let table: [(peer: String, forwarded: [String], xff: [String], client: String)] = [
            ("203.0.113.5", [], ["198.51.100.1"], "203.0.113.5"),  // an untrusted peer's header is ignored
            ("127.0.0.1", [], [], "127.0.0.1"),  // a proxy without the header is the client
            ("127.0.0.1", [], ["198.51.100.1"], "198.51.100.1"),
            // read from the right, trusted hops skipped
            ("127.0.0.1", [], ["6.6.6.6, 198.51.100.1, 10.1.1.1"], "198.51.100.1"),
            ("127.0.0.1", [], ["6.6.6.6", "198.51.100.1"], "198.51.100.1"),  // several header lines, in order
            ("127.0.0.1", [], ["garbage, 10.1.1.1"], "10.1.1.1"),  // an unreadable hop: the last trusted one stands
            ("127.0.0.1", ["for=192.0.2.60;proto=http;by=203.0.113.43"], [], "192.0.2.60"),
            ("127.0.0.1", [#"for="[2001:db8:cafe::17]:4711", for=10.0.0.2"#], [], "2001:db8:cafe::17"),
            ("127.0.0.1", [#"for="192.0.2.9:8080""#], [], "192.0.2.9"),
            ("127.0.0.1", ["for=_hidden"], [], "127.0.0.1"),
        ]
        for row in table {
            XCTAssertEqual(resolve(row.peer, forwarded: row.forwarded, xff: row.xff), row.client, "\(row)")
        }
    }
}
