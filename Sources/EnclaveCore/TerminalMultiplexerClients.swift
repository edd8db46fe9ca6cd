/// Who looks at a PAM request's terminal through a terminal multiplexer (our rule, issue 32): sudo
/// in a tmux or screen pane is typed by whoever is attached to that server, and a server started
/// at the seat may be attached over SSH too. Pure: the shell reads the processes from /proc
/// (`TerminalMultiplexers`) and says where each client stands.
///
/// The walk: up from the requesting process to the nearest multiplexer server (the pane's shell is
/// its child); its clients are the live processes of the server's user, by real uid, that bear
/// the multiplexer's client name and have a controlling terminal — a person's attached client
/// always has one, while the commands tmux's status line and scripts run (`tmux: client` too)
/// have none. Each client is then followed the same way (it may run inside another
/// multiplexer), three deep.
///
/// The names are the processes' own (tmux sets them with prctl), so this tells where the person
/// is, not where an attacker with the user's account is; every client of the user's servers of
/// that kind counts, not only the pane's server's (the safe way round); clients of other users
/// (tmux's `server-access`, screen's multiuser mode) are not seen.
public enum TerminalMultiplexerClients {
    /// What the walk needs of one process, from `/proc/PID/stat` (and `status` for the uid).
    public struct Process: Equatable, Sendable {
        public var pid: Int32
        public var parent: Int32
        /// The name the kernel keeps (`comm`).
        public var name: String
        /// Not a zombie: a client that ended is attached to nothing.
        public var alive: Bool
        /// Whether it has a controlling terminal (`tty_nr` not 0).
        public var hasTerminal: Bool
        /// Its real uid (`status`), read only for those that bear a multiplexer's name.
        public var uid: UInt32?
        /// Its session's id: the pid of the session's leader (the shell a terminal started).
        public var session: Int32 = 0

        public init(pid: Int32, parent: Int32, name: String, alive: Bool, hasTerminal: Bool, uid: UInt32? = nil) {
            self.pid = pid
            self.parent = parent
            self.name = name
            self.alive = alive
            self.hasTerminal = hasTerminal
            self.uid = uid
        }

        /// Whether it bears the name of a multiplexer's server or client (its uid is then read).
        public var bearsAMultiplexersName: Bool { Kind.names.contains(name) }

        /// From the text of /proc/PID/stat (the name between the first "(" and the last ")",
        /// which may hold both); nil if it is not one.
        public init?(stat text: String) {
            guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"), open < close,
                let pid = Int32(String(text[..<open].filter { $0 != " " }))
            else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 4, let parent = Int32(fields[1]), let session = Int32(fields[3]),
                let tty = Int64(fields[4])
            else { return nil }
            self.init(
                pid: pid,
                parent: parent,
                name: String(text[text.index(after: open)..<close]),
                alive: !["Z", "X", "x"].contains(fields[0]),
                hasTerminal: tty != 0
            )
            self.session = session
        }
    }

    /// The multiplexers known, by the names the kernel keeps for their server and their clients.
    enum Kind: CaseIterable {
        case tmux, screen

        var serverName: String {
            switch self {
            case .tmux: "tmux: server"
            case .screen: "screen"
            }
        }

        var clientName: String {
            switch self {
            case .tmux: "tmux: client"
            case .screen: "screen"
            }
        }

        static let names = Set(allCases.flatMap { [$0.serverName, $0.clientName] })

        init?(server name: String) {
            guard let kind = Self.allCases.first(where: { $0.serverName == name }) else { return nil }
            self = kind
        }

        func isClient(_ process: Process) -> Bool {
            process.alive && process.hasTerminal && process.name == clientName
        }
    }

    /// Where the people sit who see `requester`'s terminal through the multiplexers above it
    /// (empty: none). `process`: one process, nil if unreadable. `everyProcess`: all of them,
    /// those bearing a multiplexer's name with their uid, asked only once a server is found (nil:
    /// they could not be listed in time). `uid`: a server's real uid. `place`: where a client
    /// stands. Where the daemon cannot tell — the requester or one of its parents unreadable
    /// (`hidepid`), the processes not listed, nesting too deep — one `.unknown` place: no finger.
    public static func places(
        of requester: Int32,
        process: (Int32) -> Process?,
        everyProcess: () -> [Process]?,
        uid: (Int32) -> UInt32?,
        place: (Int32) -> PAMAuthenticationRules.Place
    ) -> [PAMAuthenticationRules.Place] {
        var all: [Process]?? = .none
        var seen: Set<Int32> = []
        func walk(_ pid: Int32, depth: Int) -> [PAMAuthenticationRules.Place] {
            let found: (Int32, Kind)?
            switch nearestServer(above: pid, process) {
            case .unreadable: return [.unknown]
            case .none: return []
            case .server(let server, let kind): found = (server, kind)
            }
            guard let (server, kind) = found, seen.insert(server).inserted else { return [] }
            guard depth > 0 else { return [.unknown] }
            if all == nil { all = .some(everyProcess()) }
            guard let processes = all ?? nil, let owner = uid(server) else { return [.unknown] }
            var places: [PAMAuthenticationRules.Place] = []
            for client in processes where client.pid != server && kind.isClient(client) && client.uid == owner {
                places.append(place(client.pid))
                places += walk(client.pid, depth: depth - 1)
            }
            return places
        }
        return walk(requester, depth: 3)
    }

    private enum Ancestry {
        case server(Int32, Kind)
        case none
        /// A process on the way up could not be read.
        case unreadable
    }

    /// The nearest ancestor of `pid` that is a multiplexer's server (at most 64 steps up).
    private static func nearestServer(above pid: Int32, _ process: (Int32) -> Process?) -> Ancestry {
        var current = pid
        for _ in 0..<64 {
            guard let parent = process(current)?.parent else { return .unreadable }
            guard parent > 1 else { return .none }
            guard let above = process(parent) else { return .unreadable }
            if let kind = Kind(server: above.name) { return .server(parent, kind) }
            current = parent
        }
        return .none
    }
}
