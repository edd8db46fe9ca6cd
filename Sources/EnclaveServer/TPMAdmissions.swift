import BlockingPool
import EnclaveCore
import Synchronization

/// Each share's way onto the TPM's thread (`KeyEngine`): at most `KeyEngine.usesPerUser` key uses
/// running or waiting per share (`ShareOwner`), so that a user's subordinate uids — each a session
/// and a keychain of its own — queue that many together, not that many each, ahead of every other
/// user's keys and rollback counter. A session's share is decided when the session is made.
final class TPMAdmissions: Sendable {
    private let admissions = Mutex<[UInt32: BlockingPool.Admission]>([:])

    /// `uid`'s share's admission (the ranges as read now, unless given).
    func admission(
        for uid: UInt32,
        subordinates: SubordinateIDs = SubordinateIDFile.system.current
    ) -> BlockingPool.Admission {
        let share = ShareOwner.of(uid: uid, loginUID: nil, subordinates: subordinates)
        return admissions.withLock { admissions in
            if let admission = admissions[share] { return admission }
            let admission = BlockingWork.tpmAdmission(atMost: KeyEngine.usesPerUser)
            admissions[share] = admission
            return admission
        }
    }
}
