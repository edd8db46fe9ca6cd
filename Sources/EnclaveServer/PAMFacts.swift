import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon learns for a PAM authentication from the kernel, logind and the user database
/// (`PAMAuthenticationRules.Facts`), never from the request: the peer's uid and session come from
/// the connection (SO_PEERCRED, the cgroup read at accept; for a process of a user's service
/// manager, the session it stands in, `LoginSession.standing`), the session's remoteness and seat
/// from logind's own record of it, who looks at its terminal through a multiplexer from /proc
/// (`TerminalMultiplexers`), the lid from ACPI.
enum PAMFacts {
    /// The facts, and the session the request stands in (its prompt's seat, its audit line).
    static func read(
        _ request: PAMAuthenticationRules.Request,
        onTerminal: Bool,
        peer: PeerIdentity,
        config: DaemonConfiguration,
        realSensor: Bool
    ) async -> (facts: PAMAuthenticationRules.Facts, session: String?) {
        let logind = config.logindDirectory
        let pid = peer.pid
        var session = peer.session
        if session == nil {
            // A process of the user's service manager (a desktop's polkit agent started it):
            // small /proc and logind reads, off the cooperative threads.
            session = (try? await BlockingWork.waiting { standing(of: pid, logind: logind) }) ?? nil
        }
        let record = session.flatMap { sessionRecord($0, directory: logind) }
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
            promptShown: onTerminal,
            throughServiceManager: peer.session == nil && session != nil
        )
        // The user database only for a request from this machine's seat: a network client (sshd's
        // pre-authentication) must not learn from the time an LDAP or SSSD look-up takes which
        // names exist. NSS may ask the network: off the cooperative threads.
        if PAMAuthenticationRules.whyNotHere(request, facts) == nil {
            let user = request.user
            facts.userUID = (try? await BlockingWork.waiting { accountUID(name: user) }) ?? nil
        }
        return (facts, session)
    }

    /// Where the people sit who see process `pid`'s terminal through a multiplexer
    /// (`TerminalMultiplexerClients`): asked only where a finger would be offered.
    static func multiplexerClients(of pid: Int32, logind: String) async -> [PAMAuthenticationRules.Place] {
        (try? await BlockingWork.waiting {
            TerminalMultiplexers.clientPlaces(of: pid) { place(cgroup: $0, logind: logind) }
        }) ?? [.unknown]
    }

    /// Whether process `pid`'s terminal is drawn on the seat by an emulator of the user's service
    /// manager (`TerminalHolders.drawnOnTheSeat`): its controlling terminal and session from its
    /// `stat`, the emulator as the session leader's parent, whether it alone holds the terminal's
    /// master and what it runs (the helper reads that one process's descriptors), and the service
    /// manager each runs under. Blocking: run it on `BlockingWork`.
    static func terminalDrawnOnTheSeat(of pid: Int32, reader: PtyMasterHolders.Reader, listed: Set<String>) -> Bool {
        let text = { (pid: Int32, file: String) in PeerProcess.procText(pid, file) }
        guard let stat = text(pid, "stat"), let requester = TerminalMultiplexerClients.Process(stat: stat),
            let index = TerminalDevice.controllingTerminal(stat: stat)?.pseudoTerminalIndex, requester.session > 1,
            let leader = text(requester.session, "stat").flatMap(TerminalMultiplexerClients.Process.init(stat:)),
            leader.parent > 1
        else { return false }
        let emulator = leader.parent
        return TerminalHolders.drawnOnTheSeat(
            emulator: reader.holders(index: index, only: emulator),
            emulatorManagerUID: text(emulator, "cgroup").flatMap(LoginSession.serviceManagerUID(cgroup:)),
            requesterManagerUID: text(pid, "cgroup").flatMap(LoginSession.serviceManagerUID(cgroup:)),
            trusted: Set(listed.compactMap { PeerProcess.fileID(AT_FDCWD, $0) }),
            notOnAScreen: Set(TerminalHolders.notDrawnOnAScreen.compactMap { PeerProcess.fileID(AT_FDCWD, $0) })
        )
    }

    /// The session process `pid` stands in (`LoginSession.standing`), read from /proc now.
    static func standing(of pid: Int32, logind: String) -> String? {
        PeerProcess.procText(pid, "cgroup").flatMap { standing(cgroup: $0, logind: logind) }
    }

    static func standing(cgroup: String, logind: String) -> String? {
        LoginSession.standing(
            cgroup: cgroup,
            user: { uid in
                FileManager.default.contents(atPath: "\(logind)/users/\(uid)").map {
                    LoginUserRecord(text: String(decoding: $0, as: UTF8.self))
                }
            },
            sessionRemote: { sessionRecord($0, directory: logind)?.remote }
        )
    }

    /// Where a process with this cgroup stands, as logind states its session.
    static func place(cgroup: String, logind: String) -> PAMAuthenticationRules.Place {
        guard let record = standing(cgroup: cgroup, logind: logind).flatMap({ sessionRecord($0, directory: logind) })
        else { return .unknown }
        return PAMAuthenticationRules.Place(remote: record.remote, seat: record.seat)
    }

    /// logind's record of session `id`; nil when there is none (or `id` names no session).
    static func sessionRecord(_ id: String, directory: String) -> LoginSessionRecord? {
        guard LoginSession.isSessionID(id[...]),
            let data = FileManager.default.contents(atPath: "\(directory)/sessions/\(id)")
        else { return nil }
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
