import Prometheus

/// The server's counters, exported at /metrics in Prometheus' text format.
public final class LoginMetrics: Sendable {
    public struct Outcomes: Sendable {
        let succeeded: Counter
        let failed: Counter
        func success() { succeeded.increment() }
        func failure() { failed.increment() }
    }

    public let registry: PrometheusCollectorRegistry
    public let passwordLogins: Outcomes
    public let passkeyLogins: Outcomes
    public let registrations: Outcomes
    public let rateLimited: Counter
    public let requests: Counter

    public init() {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        func name(_ metric: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "touchlogin", metricName: metric, unitName: "total", helpText: help)
        }
        func outcomes(_ metric: String, _ help: String) -> Outcomes {
            Outcomes(
                succeeded: registry.makeCounter(descriptor: name(metric, help), labels: [("result", "success")]),
                failed: registry.makeCounter(descriptor: name(metric, help), labels: [("result", "failure")])
            )
        }
        passwordLogins = outcomes("password_logins", "Password logins by result")
        passkeyLogins = outcomes("passkey_logins", "Passkey (fingerprint) logins by result")
        registrations = outcomes("device_registrations", "Device registrations by result")
        rateLimited = registry.makeCounter(descriptor: name("rate_limited", "Requests refused by a rate limit"))
        requests = registry.makeCounter(descriptor: name("http_requests", "HTTP requests served"))
    }

    public func exposition() -> String { registry.emitToString() }
}
