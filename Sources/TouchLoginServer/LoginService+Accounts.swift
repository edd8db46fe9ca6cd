import Crypto
import Foundation
import KeyAttestation
import Logging
import Synchronization
import TouchLoginAPI
import WebAuthn

/// Accounts and passwords: sign-up, password login, password changes.
extension LoginService {
    // MARK: Accounts and passwords

    public func createAccount(_ r: CreateAccountRequest, address: String) async throws -> SessionResponse {
        try admit(address)
        let username = try Self.normalized(r.username)
        let hash = try await newPasswordHash(r.password)
        let account = Account(
            id: UUID().uuidString.lowercased(),
            username: username,
            passwordHash: hash,
            userHandle: Self.random(32),
            createdAt: clock()
        )
        do { try await store.createAccount(account) } catch let error as LoginServerError where error.code == .duplicate
        {
            throw APIError(.accountExists, "That username is taken.")
        }
        logger.info("account created", metadata: ["account": "\(account.id)"])
        return try await startSession(for: account, event: .signUp, address: address)
    }

    public func passwordLogin(_ r: PasswordLoginRequest, address: String) async throws -> SessionResponse {
        try admit(address)
        let username = (try? Self.normalized(r.username)) ?? ""
        let key = try await secretKey()
        let addressKey = Self.addressKey(address)
        let account = try await checkPassword(r.password, username: username, address: address) {
            PasswordBudget.login(
                username: username,
                addressKey: addressKey,
                clientToken: r.clientToken,
                passwordHash: $0.passwordHash,
                key: key
            )
        }
        metrics.passwordLogins.success()
        return try await startSession(for: account, event: .passwordLogin, address: address)
    }

    /// A step-up: the account's password typed again into a live session, which may then change
    /// the account's devices for `ServerConfiguration.stepUpWindow` seconds. Judged on the
    /// session's own budget (its device's, for a passkey session): others' wrong guesses at the
    /// name never make its holder wait.
    public func confirmPassword(
        session: Session,
        account: Account,
        _ r: PasswordConfirmationRequest,
        address: String
    ) async throws {
        try admit(address)
        _ = try await checkPassword(r.password, username: account.username, address: address) { _ in .inSession(session)
        }
        try await store.markPasswordVerified(tokenHash: session.tokenHash, at: clock())
        logger.info("password confirmed", metadata: ["account": "\(account.id)"])
    }

    /// A new password for the account: proved by the current one, or by a step-up in this session.
    /// Every other session of the account ends (whoever knew the old password is signed out).
    public func changePassword(
        session: Session,
        account: Account,
        _ r: PasswordChangeRequest,
        address: String
    ) async throws {
        if let current = r.currentPassword {
            try admit(address)
            _ = try await checkPassword(current, username: account.username, address: address) { _ in
                .inSession(session)
            }
        } else {
            try requireFreshPassword(session)
        }
        let hash = try await newPasswordHash(r.newPassword)
        let now = clock()
        try await store.changePassword(
            accountID: account.id,
            hash: hash,
            keepingSession: session.tokenHash,
            verifiedAt: now,
            clearingFailures: Self.accountPasswordKey(account.username),
            event: AccountEvent(accountID: account.id, at: now, kind: .passwordChanged, address: address)
        )
        logger.info("password changed", metadata: ["account": "\(account.id)"])
    }

    /// The scrypt hash of a new password that meets the rules (8 characters to 256 bytes).
    func newPasswordHash(_ password: String) async throws -> String {
        guard password.count >= 8 else { throw APIError(.weakPassword, "A password needs at least 8 characters.") }
        guard password.utf8.count <= 256 else {
            throw APIError(.weakPassword, "A password may have at most 256 bytes.")
        }
        let hasher = self.hasher
        return try await passwordWork.run { try hasher.hash(password) }
    }
}
