import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon learns for a PAM authentication from the kernel, logind and the user database
/// (`PAMAuthenticationRules.Facts`), never from the request: the peer's uid and session come from
/// the connection (SO_PEERCRED, the cgroup read at accept), the session's remoteness and seat from
/// logind's own record of it, the lid from ACPI.
enum PAMFacts {
    static func read(
        _ request: PAMAuthenticationRules.Request,
        onTerminal: Bool,
        peer: PeerIdentity,
        config: DaemonConfiguration,
        realSensor: Bool
    ) async -> PAMAuthenticationRules.Facts {
        let record = peer.session.flatMap { sessionRecord($0, directory: config.logindDirectory) }
        var facts = PAMAuthenticationRules.Facts(
            peerUID: peer.uid,
            userUID: nil,
            // A session logind no longer states (or never did) is no session we can vouch for.
            sessionRemote: record?.remote,
            seat: record?.seat,
            localHostNames: localHostNames(),
            lidClosed: lidIsClosed(),
            // Our limit: a real reader is taken to be the built-in one (logind does not say where
            // a reader sits); a simulated sensor never sits under a lid.
            onlyBuiltInReader: realSensor,
            sessionUID: record?.uid,
            // pam_unix reads /etc/shadow itself or asks its helper, which checks the caller's own
            // password only: the packaged daemon needs the shadow group for anyone else's.
            passwordCheckable: geteuid() == 0 || access("/etc/shadow", R_OK) == 0,
            // Set by the connection, which knows the agents (`ConnectionHandler+PAM`).
            promptShown: onTerminal
        )
        // The user database only for a request from this machine's seat: a network client (sshd's
        // pre-authentication) must not learn from the time an LDAP or SSSD look-up takes which
        // names exist. NSS may ask the network: off the cooperative threads.
        if PAMAuthenticationRules.whyNotHere(request, facts) == nil {
            let user = request.user
            facts.userUID = (try? await BlockingWork.waiting { accountUID(name: user) }) ?? nil
        }
        return facts
    }

    /// logind's record of session `id`; nil when there is none.
    static func sessionRecord(_ id: String, directory: String) -> LoginSessionRecord? {
        guard let data = FileManager.default.contents(atPath: "\(directory)/sessions/\(id)") else { return nil }
        return LoginSessionRecord(text: String(decoding: data, as: UTF8.self))
    }

    /// The names sudo may pass as PAM_RHOST for this machine: its host name (as is and its first
    /// label), localhost and the loopback addresses.
    static func localHostNames() -> Set<String> {
        var names: Set<String> = ["localhost", "localhost.localdomain", "127.0.0.1", "::1"]
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count - 1) == 0 {
            let name = String(cString: buffer)
            if !name.isEmpty {
                names.insert(name)
                names.insert(String(name.prefix { $0 != "." }))
            }
        }
        return names
    }

    /// Any lid ACPI reports closed (`/proc/acpi/button/lid/*/state`: "state:      closed").
    static func lidIsClosed() -> Bool {
        let directory = "/proc/acpi/button/lid"
        guard let lids = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return false }
        return lids.contains { lid in
            guard let data = FileManager.default.contents(atPath: "\(directory)/\(lid)/state") else { return false }
            return String(decoding: data, as: UTF8.self).contains("closed")
        }
    }
}
