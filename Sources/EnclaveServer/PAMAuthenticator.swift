import CPAM
import EnclaveCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Checks a password with PAM (the configured service's `auth` and `account` stacks). The password
/// lives only in memory for the call: copied for PAM's conversation, wiped and freed after; it is
/// never logged. Runs on `BlockingWork`'s waiting pool: a PAM stack may sleep (pam_faildelay) or block.
enum PAMAuthenticator {
    enum Outcome: Equatable, Sendable {
        case accepted
        /// The stack said the password is wrong (PAM_AUTH_ERR): a counted attempt.
        case refused(String)
        /// Not a verdict on the password, never counted: the service can succeed without the
        /// password (not asked at all), or PAM could not check it (pam_unix run by a daemon that
        /// may not read /etc/shadow, an error of the stack, an expired account).
        case unsuitable(String)
    }

    /// Why `service` is not a passcode check, if it is not.
    static func unsuitability(service: String) -> String? {
        let other = PAMStack.read(service: service, PAMStack.systemFile).otherFactors
        guard !other.isEmpty else { return nil }
        return
            "the PAM service \(service) can succeed without the password (\(other.joined(separator: ", "))): that would count as the passcode, so the daemon uses password-only stacks only; point pam-service at one, such as the shipped /etc/pam.d/laenclaved"
    }

    static func check(service: String, user: String, password: String) async -> Outcome {
        do {
            return try await BlockingWork.waiting { checkNow(service: service, user: user, password: password) }
        } catch {
            return .unsuitable("the PAM check could not run: \(error)")
        }
    }

    private static func checkNow(service: String, user: String, password: String) -> Outcome {
        // Read at every check: pam-auth-update may add pam_fprintd to common-auth at any time.
        if let why = unsuitability(service: service) { return .unsuitable(why) }
        guard let secret = strdup(password) else { return .unsuitable("out of memory") }
        defer {
            memset(secret, 0, strlen(secret))
            free(secret)
        }
        // PAM asks through this C callback; the password arrives as its appdata.
        let converse:
            @convention(c) (
                Int32, UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
                UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?, UnsafeMutableRawPointer?
            ) -> Int32 = { count, messages, responses, appdata in
                guard count > 0, let messages, let responses, let appdata,
                    let replies = calloc(Int(count), MemoryLayout<pam_response>.size)?.assumingMemoryBound(
                        to: pam_response.self
                    )
                else { return PAM_CONV_ERR }
                let password = appdata.assumingMemoryBound(to: CChar.self)
                for i in 0..<Int(count) {
                    let style = messages[i]?.pointee.msg_style ?? 0
                    if style == PAM_PROMPT_ECHO_OFF || style == PAM_PROMPT_ECHO_ON {
                        replies[i].resp = strdup(password)
                    }
                }
                responses.pointee = replies
                return PAM_SUCCESS
            }
        var conversation = pam_conv(conv: converse, appdata_ptr: UnsafeMutableRawPointer(secret))
        var handle: OpaquePointer?
        var status = pam_start(service, user, &conversation, &handle)
        guard status == PAM_SUCCESS, let handle else { return .unsuitable(describe(handle, status)) }
        defer { pam_end(handle, status) }
        status = pam_authenticate(handle, Int32(PAM_SILENT) | Int32(PAM_DISALLOW_NULL_AUTHTOK))
        // Only the stack's "wrong" is a wrong password; anything else says nothing of it.
        if status == PAM_AUTH_ERR { return .refused(describe(handle, status)) }
        guard status == PAM_SUCCESS else {
            return .unsuitable("PAM could not check the password: \(describe(handle, status))")
        }
        status = pam_acct_mgmt(handle, Int32(PAM_SILENT))
        guard status == PAM_SUCCESS else { return .unsuitable("the account: \(describe(handle, status))") }
        return .accepted
    }

    private static func describe(_ handle: OpaquePointer?, _ status: Int32) -> String {
        guard let handle else { return "PAM error \(status)" }
        return pam_strerror(handle, status).map { String(cString: $0) } ?? "PAM error \(status)"
    }
}
