import EnclaveCore
import Foundation

extension Doctor {
    /// Whether `pam_laenclave.so` is installed where Linux-PAM loads modules, and for which
    /// services in /etc/pam.d it is enabled (includes followed: `pam-auth-update --enable
    /// laenclave` puts it in common-auth, which sudo, su, login and polkit include). The services
    /// that use it, in order.
    func checkPAMModule(into report: inout DoctorReport) -> [String] {
        let installed = ["/usr/lib", "/lib"].flatMap { root in
            ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).map {
                "\(root)/\($0)/security/pam_laenclave.so"
            }
        }.first { FileManager.default.fileExists(atPath: $0) }
        let services = ((try? FileManager.default.contentsOfDirectory(atPath: "/etc/pam.d")) ?? []).filter {
            !$0.hasPrefix(".") && !$0.hasPrefix("common-")
        }
        let enabled = PAMStack.services(using: "pam_laenclave", among: services, PAMStack.systemFile)
        switch (installed, enabled.isEmpty) {
        case (nil, true):
            report.note("pam module", "pam_laenclave.so is not installed (the laenclaved package ships it)")
        case (let path?, true):
            report.note(
                "pam module",
                "\(path) is installed, not enabled: sudo pam-auth-update --enable laenclave (a finger or the password at once for sudo, su, polkit)"
            )
        case (_, false):
            report.ok("pam module", "pam_laenclave is enabled for: \(enabled.joined(separator: ", "))")
        }
        return enabled
    }
}
