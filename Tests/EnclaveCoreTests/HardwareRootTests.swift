import EnclaveCore
import XCTest

/// Which root holds the master secret, as a table: a state keeps the root it was made with, a new
/// one takes the machine's TPM when `auto` finds one this daemon may use.
final class HardwareRootTests: XCTestCase {
    func testTheRootFollowsTheStateThenTheSetting() {
        let machine = "device:/dev/tpmrm0"
        let sim = "swtpm:host=127.0.0.1,port=2321"
        typealias Row = (HardwareRoot.Setting, HardwareRoot.Recorded, String?, Bool, String, String)
        typealias MoveRow = (HardwareRoot.Setting, HardwareRoot.Recorded, String?, Bool, Bool, String, String)
        let rows: [Row] = [
            (.auto, .new, machine, false, "tpm device:/dev/tpmrm0", "a new state takes the machine's TPM"),
            (.auto, .new, nil, false, "software: no TPM", "no TPM this daemon may use: software, said"),
            (.auto, .new, nil, true, "refuse: --require-tpm", "required and absent"),
            (.off, .new, machine, false, "software: tpm = off", "off, said loudly"),
            (.off, .new, machine, true, "refuse: --require-tpm", "off contradicts required"),
            (.tcti(sim), .new, nil, false, "tpm swtpm:host=127.0.0.1,port=2321", "a named TPM"),
            (.auto, .tpm, machine, false, "tpm device:/dev/tpmrm0", "a sealed state opens with the machine's TPM"),
            (.auto, .tpm, nil, false, "refuse: has none", "a sealed state copied to a machine without a TPM"),
            (.off, .tpm, machine, false, "refuse: tpm = off cannot open", "off cannot open a sealed state"),
            (.tcti(sim), .tpm, nil, false, "tpm swtpm", "a sealed state with a named TPM (which then must open it)"),
            (.auto, .software, machine, false, "software: stays there", "an old state keeps the software root, said"),
            (.off, .software, machine, false, "software", "off: nothing to say"),
            (.auto, .software, nil, false, "software", "an old state on a machine without a TPM"),
            (.tcti(sim), .software, machine, false, "refuse: laenclaved --move-to-tpm", "no silent move"),
            (.auto, .software, machine, true, "refuse: --require-tpm", "required: an old state does not start"),
        ]
        // Root asked for the move (`--move-to-tpm`, `move-to-tpm = yes`).
        let moves: [MoveRow] = [
            (.tcti(sim), .software, nil, false, true, "move swtpm:host=127.0.0.1,port=2321", "to the named TPM"),
            (.auto, .software, machine, false, true, "move device:/dev/tpmrm0", "to the machine's TPM"),
            (.auto, .software, machine, true, true, "move device:/dev/tpmrm0", "required: the move satisfies it"),
            (.auto, .software, nil, false, true, "software: stays on the software root", "no TPM: it stays, said"),
            (.auto, .software, nil, true, true, "refuse: --require-tpm", "no TPM, required"),
            (.off, .software, machine, false, true, "refuse: tpm = off", "a move with the TPM off contradicts itself"),
            (.off, .new, machine, false, true, "refuse: tpm = off", "the same for a new state"),
            (.auto, .tpm, machine, false, true, "tpm device:/dev/tpmrm0", "moved already: it opens as it is"),
            (.auto, .new, machine, false, true, "tpm device:/dev/tpmrm0", "a new state is made on the TPM"),
        ]
        let all = rows.map { ($0.0, $0.1, $0.2, $0.3, false, $0.4, $0.5) } + moves
        for (setting, recorded, tpm, required, move, expected, why) in all {
            let decided = HardwareRoot.decide(
                setting: setting,
                recorded: recorded,
                machineTPM: tpm,
                requireTPM: required,
                move: move
            )
            let said =
                switch decided {
                case .tpm(let tcti): "tpm \(tcti)"
                case .move(let tcti): "move \(tcti)"
                case .software(let note): "software" + (note.map { ": " + $0 } ?? "")
                case .refuse(let why): "refuse: " + why
                }
            let (kind, words) =
                expected.range(of: ": ").map {
                    (String(expected[..<$0.lowerBound]), String(expected[$0.upperBound...]))
                } ?? (expected, "")
            XCTAssertTrue(said.hasPrefix(kind) && (words.isEmpty || said.contains(words)), "\(why): \(said)")
        }
        XCTAssertEqual(
            HardwareRoot.decide(setting: .auto, recorded: .software, machineTPM: nil, requireTPM: false),
            .software(note: nil),
            "nothing to say where there is no TPM"
        )
        XCTAssertEqual(
            HardwareRoot.decide(
                setting: .off,
                recorded: .software,
                machineTPM: "device:/dev/tpmrm0",
                requireTPM: false
            ),
            .software(note: nil),
            "nothing to say where the TPM was not asked for (the default)"
        )
    }

    func testTheSettingIsAutoOffOrATCTI() {
        XCTAssertEqual(HardwareRoot.Setting("auto"), .auto)
        XCTAssertEqual(HardwareRoot.Setting("off"), .off)
        XCTAssertEqual(HardwareRoot.Setting("device:/dev/tpmrm0"), .tcti("device:/dev/tpmrm0"))
        XCTAssertEqual(HardwareRoot.Setting("swtpm:host=127.0.0.1,port=2321"), .tcti("swtpm:host=127.0.0.1,port=2321"))
        for bad in [
            "", "yes", "device:tpm0", "tabrmd:", "swtpm:host=a b", "device:/dev/tpm0;rm", "libtpms:",
            String(repeating: "device:/", count: 40),
        ] {
            XCTAssertNil(HardwareRoot.Setting(bad), bad)
        }
    }
}
