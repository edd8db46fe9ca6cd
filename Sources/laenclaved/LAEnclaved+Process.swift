import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon asks of its own process at start: where its agent is, how many descriptors.
extension LAEnclaved {
    /// `laenclaved-agent` in the directory this executable runs from (as the kernel names it, links
    /// resolved, as it names the agent's): installed together, the agent needs no setting.
    static func agentBesideDaemon() -> String? {
        guard let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        return (me as NSString).deletingLastPathComponent + "/laenclaved-agent"
    }

    /// Raises the soft descriptor limit toward `wanted` (up to the hard limit); returns the limit now.
    static func raiseDescriptorLimit(to wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return wanted }
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}
