import EnclaveProtocol

/// One way of proving presence that an evaluation can ask for.
public enum EvaluationStep: Sendable, Equatable {
    /// Biometrics only (`deviceOwnerAuthenticationWithBiometrics`).
    case biometric
    /// Biometrics or the passcode (`deviceOwnerAuthentication`).
    case owner
    /// The device passcode only.
    case passcode
    /// A companion device: none exists on Linux yet, so this step always fails.
    case companion
}

/// What `SecAccessControlCreateFlags` demand at use, parsed once.
public struct AccessRequirement: Sendable, Equatable {
    /// The evaluations to pass, all of them, in order. Empty: no authentication.
    public let steps: [EvaluationStep]
    /// `or` with the passcode among the alternatives: the passcode alone still opens the item
    /// after an enrolment change (`biometryCurrentSet | or | devicePasscode`).
    public let passcodeAlternative: Bool
    /// Bound to the enrolment at creation: any enrolment change makes the item unusable.
    public let currentSet: Bool
    public let applicationPassword: Bool

    /// Several constraints without `or` must all be met (our reading of Apple's default: `and`).
    public init(flags: AccessControlFlags) throws {
        if flags.unknownBits != 0 {
            throw CoreError(
                .unknownAccessControlFlags,
                "unknown SecAccessControlCreateFlags bits 0x\(String(flags.unknownBits, radix: 16))"
            )
        }
        let anyOf = flags.contains(.or)
        if anyOf && flags.contains(.and) {
            throw CoreError(.accessControlAndWithOr, "kSecAccessControlAnd and kSecAccessControlOr exclude each other")
        }
        currentSet = flags.contains(.biometryCurrentSet)
        applicationPassword = flags.contains(.applicationPassword)
        let biometry = !flags.isDisjoint(with: .biometry)
        let passcode = flags.contains(.devicePasscode)
        let presence = flags.contains(.userPresence)
        let companion = flags.contains(.companion)
        var steps: [EvaluationStep] = []
        if anyOf {
            // Any one suffices: the owner policy offers biometrics and the passcode at once; a
            // companion, which Linux lacks, drops out of an "or" that has anything else.
            if presence || (biometry && passcode) {
                steps = [.owner]
            } else if biometry {
                steps = [.biometric]
            } else if passcode {
                steps = [.passcode]
            } else if companion {
                steps = [.companion]
            }
        } else {
            if presence { steps.append(.owner) }
            if biometry { steps.append(.biometric) }
            if passcode { steps.append(.passcode) }
            if companion { steps.append(.companion) }
        }
        self.steps = steps
        passcodeAlternative = anyOf && (passcode || presence)
    }

    /// The steps for an item or key made at `made` when the enrolment is now at `current`; nil
    /// when a `biometryCurrentSet` protection has been invalidated for good.
    public func steps(madeAt made: UInt64, enrolmentNow current: UInt64) -> [EvaluationStep]? {
        guard currentSet && made != current else { return steps }
        return passcodeAlternative ? [.passcode] : nil
    }

    public var needsAuthentication: Bool { !steps.isEmpty }
}
