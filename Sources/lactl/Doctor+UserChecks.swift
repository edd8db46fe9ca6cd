import EnclaveProtocol
import Foundation

/// The checks `lactl doctor` runs on what the daemon says of the calling user: the passcode's
/// length, enrolment changed elsewhere, the state's root.
extension Doctor {
    /// A passcode set before the length rule keeps working; the person hears that it is short.
    func checkPasscodeLength(_ s: UserStatus, into report: inout DoctorReport) {
        guard s.passcodeShorterThanMinimum == true, let minimum = s.passcodeMinimumLength else { return }
        report.note(
            "passcode",
            "shorter than the \(minimum) characters a new passcode needs; it keeps working — `lactl passcode change` sets a longer one"
        )
    }

    /// fprintd lets a desktop's settings or fprintd-enroll change the enrolled fingers without the
    /// device passcode; the daemon notices the change (and invalidates what `.biometryCurrentSet`
    /// protects) but cannot refuse it.
    func checkEnrolmentElsewhere(_ s: UserStatus, into report: inout DoctorReport) {
        guard let when = s.enrolmentChangedElsewhereAt else { return }
        let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: when))
        report.note(
            "enrolment",
            "changed outside laenclaved (fprintd-enroll, a desktop's settings) at \(date), without the device passcode; what .biometryCurrentSet protected was invalidated. Enrol with `lactl enroll`, which asks for the passcode"
        )
    }

    /// The master secret's root (`HardwareRoot`): the software root is a note, not a problem (many
    /// machines have no TPM, and a state made before keeps its root).
    func checkRoot(_ s: UserStatus, into report: inout DoctorReport) {
        switch s.root {
        case .tpm?:
            if let refused = s.stateRefused {
                return report.problem(
                    "root",
                    Printable.field(refused),
                    fix:
                        "find out why first: --reanchor accepts the state as it is (its counters, passcode, enrolment, items). "
                        + "Then root: stop the daemon, run laenclaved --reanchor on its state as the daemon's own user, start it again"
                )
            }
            report.ok(
                "root",
                "the master secret is sealed to a TPM 2.0: a copy of the state directory and key file opens nothing without that TPM, "
                    + "and a copy put back is refused (the TPM's rollback counter) "
                    + "(after a TPM clear, root seals it again with the recovery secret it issued: laenclaved --issue-tpm-recovery, --recover-tpm-root)"
            )
        case .software?:
            report.note(
                "root",
                "the software root: the key file alone opens the state, so a copy of both (a backup, a stolen disk) opens every item anywhere. "
                    + "With a TPM 2.0 the daemon may open (/dev/tpmrm0), tpm = auto seals a new state to it, and laenclaved --move-to-tpm moves this one there, keeping everything (docs/configuration.md)"
            )
        default: break
        }
    }
}
