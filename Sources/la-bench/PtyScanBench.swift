import EnclaveServer
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What asking administration on a terminal adds (issue 33): one scan of /proc for the holders of
/// a pseudo-terminal's master (`PtyMasterHolders`), beside what the machine has to scan — its
/// processes and open descriptors — and the floor of one readlink in /proc.
/// Usage: la-bench pty-scan [iterations]
enum PtyScanBench {
    static func run(iterations: Int) throws {
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw POSIXError(.ENODEV) }
        defer { close(master) }
        var index: UInt32 = 0
        guard ioctl(master, 0x8004_5430, &index) == 0 else { throw POSIXError(.ENOTTY) }  // TIOCGPTN
        let processes = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter {
            Int32($0) != nil
        }
        let descriptors = processes.reduce(0) {
            $0 + ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\($1)/fd"))?.count ?? 0)
        }
        var scans: [Double] = []
        var links: [Double] = []
        var buffer = [CChar](repeating: 0, count: 4096)
        for _ in 0..<iterations {
            scans.append(Bench.time { precondition(PtyMasterHolders.scan(index: index)?.isEmpty == false) })
            links.append(Bench.time { _ = readlink("/proc/self/exe", &buffer, buffer.count) })
        }
        scans.sort()
        links.sort()
        print("processes readable here: \(processes.count), their open descriptors: \(descriptors)")
        print(
            "scan for the master's holders: p50 \(Bench.micros(Bench.percentile(scans, 0.5))), p99 \(Bench.micros(Bench.percentile(scans, 0.99)))"
        )
        print(String(format: "one readlink in /proc (the floor): p50 %.1f µs", Bench.percentile(links, 0.5) * 1e6))
    }
}
