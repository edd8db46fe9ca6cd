import EnclaveCore
import EnclaveProtocol
import XCTest

final class PromptKeyboardTests: XCTestCase {
    private func screen(
        passcode: Bool = true,
        fallback: String? = "Enter Password",
        retry: Bool = false,
        simulated: Bool = false,
        armed: Bool = true
    ) -> PromptScreen {
        PromptScreen(
            app: "/usr/bin/app",
            reason: "Unlock",
            instruction: "Touch ID",
            cancelTitle: "Cancel",
            fallbackTitle: fallback,
            passcodeEntry: passcode,
            retryOffered: retry,
            sensorArmed: armed,
            sensorName: "Touch ID",
            sensorSimulated: simulated,
            passcodeRetryAfter: nil,
            passcodeDisabled: false
        )
    }

    private func typing(_ bytes: [UInt8], on s: PromptScreen?) -> [PromptKeyboard.Action] {
        var keyboard = PromptKeyboard()
        return bytes.compactMap { keyboard.key($0, on: s) }
    }

    func testKeys() {
        let cases: [(String, [UInt8], PromptScreen?, [PromptKeyboard.Action])] = [
            ("passcode then Enter", Array("1234\r".utf8), screen(), [.passcode("1234")]),
            ("newline works as Enter", Array("1234\n".utf8), screen(), [.passcode("1234")]),
            ("backspace", Array("12x".utf8) + [127] + Array("34\r".utf8), screen(), [.passcode("1234")]),
            ("Ctrl-H is backspace too", Array("12x".utf8) + [8] + Array("3\r".utf8), screen(), [.passcode("123")]),
            ("Ctrl-U clears the line", Array("99".utf8) + [21] + Array("12\r".utf8), screen(), [.passcode("12")]),
            ("Enter with nothing typed does nothing", [13], screen(), []),
            ("typing while no passcode is asked is dropped", Array("1234\r".utf8), screen(passcode: false), []),
            ("Ctrl-C cancels", [3], screen(), [.cancel]),
            ("Esc may cancel", [27], screen(), [.escape]),
            ("Ctrl-F is the fallback button", [6], screen(), [.fallback]),
            ("no fallback button, no fallback", [6], screen(fallback: nil), []),
            ("Ctrl-R only when offered", [18, 18], screen(retry: true), [.retry, .retry]),
            ("Ctrl-R not offered", [18], screen(), []),
            (
                "simulated touches with a simulated, armed sensor", [20, 14], screen(simulated: true),
                [.simulatedMatch, .simulatedNoMatch]
            ),
            ("no scripted touches on a real reader", [20, 14], screen(simulated: false), []),
            ("no touches while the sensor is not armed", [20], screen(simulated: true, armed: false), []),
            ("nothing before the first screen", Array("1\r".utf8) + [6, 18, 20], nil, []),
            ("Ctrl-C still cancels before the first screen", [3], nil, [.cancel]),
            (
                "other control bytes are ignored", [1, 2, 4, 5, 7, 9, 11, 12] + Array("7\r".utf8), screen(),
                [.passcode("7")]
            ),
            ("UTF-8 passcodes", Array("päss\r".utf8), screen(), [.passcode("päss")]),
        ]
        for (name, bytes, s, expected) in cases {
            XCTAssertEqual(typing(bytes, on: s), expected, name)
        }
    }

    func testAPasscodeIsBoundedAndForgottenAfterEnter() {
        var keyboard = PromptKeyboard()
        for _ in 0..<(WireLimits.maxPasscodeBytes + 50) { _ = keyboard.key(UInt8(ascii: "9"), on: screen()) }
        XCTAssertEqual(keyboard.typedCount, WireLimits.maxPasscodeBytes)
        XCTAssertEqual(
            keyboard.key(13, on: screen()),
            .passcode(String(repeating: "9", count: WireLimits.maxPasscodeBytes))
        )
        XCTAssertEqual(keyboard.typedCount, 0)
        XCTAssertEqual(keyboard.key(13, on: screen()), nil, "nothing left to send")
    }

    func testThePasscodeNeverAppearsInADescription() {
        XCTAssertFalse("\(PromptKeyboard.Action.passcode("123456"))".contains("123456"))
    }

    /// The app's strings cannot drive the terminal: escapes are shown as text.
    func testTheAppsTextIsEscapedOnThePrompt() {
        var s = screen()
        s.app = "/usr/bin/evil\u{1B}]0;owned\u{07}"
        s.reason = "Unlock\u{1B}[2J\u{1B}[Hfake prompt"
        s.fallbackTitle = "\u{202E}drowssaP"
        s.cancelTitle = "Cancel\r\nline"
        let text = PromptText.lines(s, first: true).joined(separator: "\n") + PromptText.closing("done\u{1B}[31m")
        XCTAssertFalse(
            text.unicodeScalars.contains {
                $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x202E || $0.value == 0x0D
            },
            text
        )
        XCTAssertTrue(text.contains("wants to confirm it is you"))
        XCTAssertTrue(text.contains("\\u{1B}"), text)
    }

    /// Administration says so in its heading: an app's evaluation, whatever its reason, cannot read
    /// as the daemon asking for the person's permission.
    func testAdministrationHasAHeadingOfItsOwn() {
        var s = screen()
        s.reason = "Allow it to list the keychain items of every app of yours"
        XCTAssertTrue(PromptText.lines(s, first: true)[1].hasSuffix("wants to confirm it is you"))
        s.administration = true
        XCTAssertTrue(
            PromptText.lines(s, first: true)[1].hasSuffix("asks for your permission (laenclaved administration)")
        )
    }
}
