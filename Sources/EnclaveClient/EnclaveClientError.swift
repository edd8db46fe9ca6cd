import EnclaveProtocol

/// Why a request to the daemon got no answer from it (a refusal with an answer is `failure`).
public enum EnclaveClientError: Error, CustomStringConvertible, Equatable {
    case unreachable(String)
    /// Why no daemon serves this process, said whole (`EnclaveConnections.shared`).
    case unavailable(DaemonUnavailability)
    /// What listens at the socket runs as a user we do not trust with a terminal or a secret.
    case untrustedDaemon(path: String, uid: UInt32?)
    case connectionLost
    case protocolError(String)
    /// A descriptor (the terminal, a secret's pipe) did not reach the daemon's handoff socket.
    case handoffFailed(String)
    case failure(Failure)

    public var description: String {
        switch self {
        case .unreachable(let why): return "laenclaved is not reachable: \(why)"
        case .unavailable(let problem): return problem.description
        case .untrustedDaemon(let path, let uid):
            return
                "the process at \(path) is not a trusted laenclaved (it runs as \(uid.map { "uid \($0)" } ?? "a user the kernel did not say"), neither this user nor root)"
        case .connectionLost: return "the connection to laenclaved was lost"
        case .protocolError(let why): return "laenclaved answered something unexpected: \(why)"
        case .handoffFailed(let why): return why
        case .failure(let f): return f.message
        }
    }
}
