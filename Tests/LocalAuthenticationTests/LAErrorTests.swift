import Foundation
import LocalAuthentication
import XCTest

/// LAError's public surface against Apple's raw values (apple-api.md §2).
final class LAErrorTests: XCTestCase {
    func testDomain() {
        XCTAssertEqual(LAErrorDomain, "com.apple.LocalAuthentication")
        XCTAssertEqual(kLAErrorDomain, "com.apple.LocalAuthentication")
        XCTAssertEqual(LAError.errorDomain, LAErrorDomain)
    }

    func testEveryCodeHasApplesRawValue() {
        let expected: [(LAError.Code, Int)] = [
            (.authenticationFailed, -1),
            (.userCancel, -2),
            (.userFallback, -3),
            (.systemCancel, -4),
            (.passcodeNotSet, -5),
            (.touchIDNotAvailable, -6),
            (.touchIDNotEnrolled, -7),
            (.touchIDLockout, -8),
            (.appCancel, -9),
            (.invalidContext, -10),
            (.watchNotAvailable, -11),
            (.biometryNotPaired, -12),
            (.biometryDisconnected, -13),
            (.invalidDimensions, -14),
            (.notInteractive, -1004),
            (.biometryNotAvailable, -6),
            (.biometryNotEnrolled, -7),
            (.biometryLockout, -8),
            (.companionNotAvailable, -11),
        ]
        for (code, raw) in expected {
            XCTAssertEqual(code.rawValue, raw, "\(code)")
            XCTAssertEqual(LAError.Code(rawValue: raw), code, "\(raw)")
        }
        // Fifteen distinct values; -1004 is the outlier, not a contiguous table.
        XCTAssertEqual(
            Set(LAError.Code.allCases.map(\.rawValue)),
            [-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -14, -1004]
        )
        XCTAssertEqual(LAError.Code.allCases.count, 15)
    }

    func testAliasesAreTheSameCode() {
        XCTAssertEqual(LAError.Code.biometryNotAvailable, .touchIDNotAvailable)
        XCTAssertEqual(LAError.Code.biometryNotEnrolled, .touchIDNotEnrolled)
        XCTAssertEqual(LAError.Code.biometryLockout, .touchIDLockout)
        XCTAssertEqual(LAError.Code.companionNotAvailable, .watchNotAvailable)
        XCTAssertEqual(LAError.Code.companionNotAvailable.rawValue, -11)
        XCTAssertEqual(LAError.Code.notInteractive.rawValue, -1004)
        XCTAssertEqual(LAError(.biometryLockout), LAError(.touchIDLockout))
        XCTAssertEqual(LAError(.companionNotAvailable).errorCode, -11)
    }

    func testStaticShorthandsOnLAError() {
        let pairs: [(LAError.Code, Int)] = [
            (LAError.authenticationFailed, -1), (LAError.userCancel, -2), (LAError.userFallback, -3),
            (LAError.systemCancel, -4), (LAError.passcodeNotSet, -5), (LAError.touchIDNotAvailable, -6),
            (LAError.touchIDNotEnrolled, -7), (LAError.touchIDLockout, -8), (LAError.appCancel, -9),
            (LAError.invalidContext, -10), (LAError.biometryNotAvailable, -6), (LAError.biometryNotEnrolled, -7),
            (LAError.biometryLockout, -8), (LAError.notInteractive, -1004), (LAError.watchNotAvailable, -11),
            (LAError.companionNotAvailable, -11), (LAError.biometryNotPaired, -12),
            (LAError.biometryDisconnected, -13), (LAError.invalidDimensions, -14),
        ]
        for (code, raw) in pairs { XCTAssertEqual(code.rawValue, raw) }
    }

    func testNoCodeZeroOrOtherUnknownValues() {
        XCTAssertNil(LAError.Code(rawValue: 0))
        XCTAssertNil(LAError.Code(rawValue: 1))
        XCTAssertNil(LAError.Code(rawValue: -15))
        XCTAssertNil(LAError.Code(rawValue: -1000))
        XCTAssertNil(LAError.Code(rawValue: -1003))
        XCTAssertNil(LAError.Code(rawValue: -1005))
    }

    func testBridgesToNSErrorWithDomainAndCode() {
        for code in LAError.Code.allCases {
            let error: Error = LAError(code)
            let ns = error as NSError
            XCTAssertEqual(ns.domain, "com.apple.LocalAuthentication", "\(code)")
            XCTAssertEqual(ns.code, code.rawValue, "\(code)")
            XCTAssertFalse(ns.localizedDescription.isEmpty, "\(code)")
            XCTAssertEqual((error as? LAError)?.code, code)
        }
        let custom = LAError(.userCancel, userInfo: [NSLocalizedDescriptionKey: "Nope."])
        XCTAssertEqual(custom.localizedDescription, "Nope.")
        XCTAssertEqual((custom as NSError).localizedDescription, "Nope.")
        XCTAssertEqual(custom.errorUserInfo[NSLocalizedDescriptionKey] as? String, "Nope.")
        XCTAssertEqual(custom.userInfo[NSLocalizedDescriptionKey] as? String, "Nope.")
    }

    func testEqualityIsByCode() {
        XCTAssertEqual(LAError(.userCancel), LAError(.userCancel, userInfo: [NSLocalizedDescriptionKey: "other words"]))
        XCTAssertNotEqual(LAError(.userCancel), LAError(.userFallback))
        XCTAssertEqual(
            Set([LAError(.appCancel), LAError(.appCancel, userInfo: [NSLocalizedDescriptionKey: "x"])]).count,
            1
        )
    }

    func testCatchPatternMatchesAThrownLAError() {
        func fail(_ code: LAError.Code) throws { throw LAError(code) }
        do {
            try fail(.userCancel)
            XCTFail("must throw")
        } catch LAError.userCancel {
            // expected
        } catch { XCTFail("userCancel not matched by the pattern: \(error)") }

        do {
            try fail(.biometryLockout)
            XCTFail("must throw")
        } catch LAError.touchIDLockout {
            // the alias and the case are one code
        } catch { XCTFail("lockout not matched: \(error)") }

        do {
            try fail(.userFallback)
            XCTFail("must throw")
        } catch LAError.userCancel {
            XCTFail("userFallback must not match userCancel")
        } catch LAError.userFallback {
            // expected
        } catch { XCTFail("userFallback not matched: \(error)") }

        do { try fail(.companionNotAvailable) } catch LAError.watchNotAvailable {} catch { XCTFail("\(error)") }
        do { try fail(.notInteractive) } catch LAError.notInteractive {} catch { XCTFail("\(error)") }
    }

    func testCatchPatternMatchesAnNSErrorInTheDomain() {
        func fail(_ error: Error) throws { throw error }
        do {
            try fail(NSError(domain: LAErrorDomain, code: -2))
            XCTFail("must throw")
        } catch LAError.userCancel {
            // expected
        } catch { XCTFail("an NSError in LAErrorDomain with -2 must match userCancel: \(error)") }

        do { try fail(NSError(domain: LAErrorDomain, code: -1004)) } catch LAError.notInteractive {} catch {
            XCTFail("\(error)")
        }
        // Same code, another domain: no match.
        do { try fail(NSError(domain: NSCocoaErrorDomain, code: -2)) } catch LAError.userCancel {
            XCTFail("only LAErrorDomain matches")
        } catch {}
        do { try fail(NSError(domain: "com.example", code: -2)) } catch LAError.userCancel {
            XCTFail("only LAErrorDomain matches")
        } catch {}
        // Same domain, another code: no match.
        do { try fail(NSError(domain: LAErrorDomain, code: -3)) } catch LAError.userCancel {
            XCTFail("-3 is not userCancel")
        } catch {}
        // Pattern used directly.
        XCTAssertTrue(LAError.userCancel ~= NSError(domain: LAErrorDomain, code: -2))
        XCTAssertTrue(LAError.Code.biometryNotAvailable ~= LAError(.touchIDNotAvailable))
        XCTAssertFalse(LAError.userCancel ~= LAError(.appCancel))
    }

    func testRoundTripThroughNSError() {
        for code in LAError.Code.allCases {
            let original = LAError(code, userInfo: [NSLocalizedDescriptionKey: "message \(code.rawValue)"])
            let ns = original as NSError
            guard let back = LAError(ns) else {
                XCTFail("\(code) did not come back")
                continue
            }
            XCTAssertEqual(back.code, code)
            XCTAssertEqual(back, original)
            XCTAssertEqual(back.localizedDescription, "message \(code.rawValue)")
        }
        let plain = NSError(domain: LAErrorDomain, code: -8)
        XCTAssertEqual(LAError(plain)?.code, .biometryLockout)
        XCTAssertNil(LAError(NSError(domain: LAErrorDomain, code: 0)))
        XCTAssertNil(LAError(NSError(domain: LAErrorDomain, code: 42)))
        XCTAssertNil(LAError(NSError(domain: "com.apple.Security", code: -2)))
    }

    /// Apple's bridging: what `canEvaluatePolicy` puts in its error pointer is an `NSError`, and
    /// app code reads it with `as? LAError` or wraps it with `LAError(_nsError:)`.
    func testAnNSErrorInTheDomainCastsToLAError() {
        let ns = NSError(
            domain: LAErrorDomain,
            code: -7,
            userInfo: [NSLocalizedDescriptionKey: "No identities are enrolled."]
        )
        let asError: Error = ns
        XCTAssertEqual((asError as? LAError)?.code, .biometryNotEnrolled)
        XCTAssertEqual((ns as Any as? LAError)?.localizedDescription, "No identities are enrolled.")
        let wrapped = LAError(_nsError: ns)
        XCTAssertEqual(wrapped.code, .biometryNotEnrolled)
        XCTAssertTrue(wrapped._nsError === ns)
        XCTAssertTrue((wrapped as NSError) === ns || (wrapped as NSError).isEqual(ns))
        switch asError {
        case LAError.biometryNotEnrolled: break
        default: XCTFail("an NSError in the domain must match the LAError pattern in a switch")
        }
        // Another domain, or a code LAError does not have: no cast.
        XCTAssertNil(NSError(domain: NSCocoaErrorDomain, code: -7) as Any as? LAError)
        XCTAssertNil(NSError(domain: LAErrorDomain, code: 3) as Any as? LAError)
        XCTAssertEqual(LAError.Code.userCancel.rawValue, LAError(.userCancel).errorCode)
    }

    func testCConstants() {
        XCTAssertEqual(kLAErrorAuthenticationFailed, -1)
        XCTAssertEqual(kLAErrorUserCancel, -2)
        XCTAssertEqual(kLAErrorUserFallback, -3)
        XCTAssertEqual(kLAErrorSystemCancel, -4)
        XCTAssertEqual(kLAErrorPasscodeNotSet, -5)
        XCTAssertEqual(kLAErrorTouchIDNotAvailable, -6)
        XCTAssertEqual(kLAErrorTouchIDNotEnrolled, -7)
        XCTAssertEqual(kLAErrorTouchIDLockout, -8)
        XCTAssertEqual(kLAErrorAppCancel, -9)
        XCTAssertEqual(kLAErrorInvalidContext, -10)
        XCTAssertEqual(kLAErrorBiometryNotAvailable, -6)
        XCTAssertEqual(kLAErrorBiometryNotEnrolled, -7)
        XCTAssertEqual(kLAErrorBiometryLockout, -8)
        XCTAssertEqual(kLAErrorWatchNotAvailable, -11)
        XCTAssertEqual(kLAErrorCompanionNotAvailable, -11)
        XCTAssertEqual(kLAErrorBiometryNotPaired, -12)
        XCTAssertEqual(kLAErrorBiometryDisconnected, -13)
        XCTAssertEqual(kLAErrorInvalidDimensions, -14)
        XCTAssertEqual(kLAErrorNotInteractive, -1004)
        // Each constant agrees with the Swift code of the same name.
        let pairs: [(Int32, LAError.Code)] = [
            (kLAErrorAuthenticationFailed, .authenticationFailed), (kLAErrorUserCancel, .userCancel),
            (kLAErrorUserFallback, .userFallback), (kLAErrorSystemCancel, .systemCancel),
            (kLAErrorPasscodeNotSet, .passcodeNotSet), (kLAErrorTouchIDNotAvailable, .touchIDNotAvailable),
            (kLAErrorTouchIDNotEnrolled, .touchIDNotEnrolled), (kLAErrorTouchIDLockout, .touchIDLockout),
            (kLAErrorAppCancel, .appCancel), (kLAErrorInvalidContext, .invalidContext),
            (kLAErrorBiometryNotAvailable, .biometryNotAvailable), (kLAErrorBiometryNotEnrolled, .biometryNotEnrolled),
            (kLAErrorBiometryLockout, .biometryLockout), (kLAErrorWatchNotAvailable, .watchNotAvailable),
            (kLAErrorCompanionNotAvailable, .companionNotAvailable), (kLAErrorBiometryNotPaired, .biometryNotPaired),
            (kLAErrorBiometryDisconnected, .biometryDisconnected), (kLAErrorInvalidDimensions, .invalidDimensions),
            (kLAErrorNotInteractive, .notInteractive),
        ]
        for (constant, code) in pairs { XCTAssertEqual(Int(constant), code.rawValue, "\(code)") }
    }
}
