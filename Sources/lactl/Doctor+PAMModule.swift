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
            if !Self.daemonReadsPasswordHashes() {
                report.note(
                    "pam module",
                    "the daemon's user is not in group shadow, so it cannot check login passwords: the module offers the finger, and pam_unix asks the password next; for either at once on the daemon's prompt: sudo usermod -aG shadow laenclaved && sudo systemctl restart laenclaved.service (it lets the daemon read every password hash)"
                )
            }
        }
        return enabled
    }

    /// Whether the packaged daemon's user can read /etc/shadow (its group, or a member of shadow):
    /// pam_unix's helper checks only the caller's own password.
    static func daemonReadsPasswordHashes() -> Bool {
        guard let user = getpwnam("laenclaved") else { return true }  // not the package: root runs it
        guard let shadow = getgrnam("shadow") else { return false }
        if user.pointee.pw_gid == shadow.pointee.gr_gid { return true }
        var member = shadow.pointee.gr_mem
        while let name = member?.pointee {
            if String(cString: name) == "laenclaved" { return true }
            member = member?.advanced(by: 1)
        }
        return false
    }
}
