import Foundation
import Security

extension LAContext {
    /// Apple's `evaluateAccessControl(_:operation:localizedReason:)`: evaluates the access
    /// control's constraints on this context, so keychain and key calls given the context do not
    /// prompt again.
    @discardableResult
    public func evaluateAccessControl(
        _ accessControl: SecAccessControl,
        operation: LAAccessControlOperation,
        localizedReason: String
    ) async throws -> Bool {
        try await evaluateAccessControlFlags(
            accessControl.wireValue.flags,
            operation: operation,
            localizedReason: localizedReason
        )
    }

    @preconcurrency public func evaluateAccessControl(
        _ accessControl: SecAccessControl,
        operation: LAAccessControlOperation,
        localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        Task {
            do {
                reply(
                    try await evaluateAccessControl(
                        accessControl,
                        operation: operation,
                        localizedReason: localizedReason
                    ),
                    nil
                )
            } catch { reply(false, error) }
        }
    }
}
