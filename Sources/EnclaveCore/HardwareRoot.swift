/// Which root holds the daemon's master secret (issue 31): the machine's TPM 2.0, so that a copied
/// state directory and key file open nothing on another machine, or the software root (the key
/// file alone, as before). The choice is made once, when a state is new, and recorded with it (the
/// sealed blob beside the state): a state keeps its root.
///
/// Our choices: the default is `auto` for the system daemon and `off` for a user-mode one (every
/// user-mode daemon would define a counter of its own in the TPM's small NV); `auto`
/// takes the machine's TPM (`/dev/tpmrm0`, through the kernel's resource
/// manager) when this daemon may use it, and otherwise the software root, saying so; it never
/// tries a TCP simulator, which any local user could run. A state made with the software root
/// stays there until root moves it (`move`: `laenclaved --move-to-tpm`, or `move-to-tpm = yes` at
/// start; the item 7); a state sealed to a TPM opens only with that TPM.
public enum HardwareRoot {
    /// `tpm = auto | off | device:PATH | swtpm:host=H,port=P | mssim:host=H,port=P` (tpm2-tss's
    /// TCTI syntax), or `--tpm`.
    public enum Setting: Equatable, Sendable {
        case auto
        case off
        case tcti(String)

        /// What a value may be, for the refusal of any other.
        public static let expected =
            "auto, off, or a TPM in tpm2-tss's syntax (device:/dev/tpmrm0, swtpm:host=H,port=P)"

        /// nil for anything else (`expected` says what may be).
        public init?(_ value: String) {
            switch value {
            case "auto": self = .auto
            case "off": self = .off
            default:
                let allowed = value.unicodeScalars.allSatisfy {
                    ($0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil))
                        || "/:=,._-".unicodeScalars.contains($0)
                }
                guard allowed, value.count <= 256,
                    value.hasPrefix("device:/") || value.hasPrefix("swtpm:") || value.hasPrefix("mssim:")
                else { return nil }
                self = .tcti(value)
            }
        }
    }

    /// What the state directory says of its root.
    public enum Recorded: Equatable, Sendable {
        /// No state yet: the root is chosen now.
        case new
        /// A state made with the key file alone.
        case software
        /// A state whose master secret is sealed to a TPM.
        case tpm
    }

    public enum Decision: Equatable, Sendable {
        /// The key file alone; `note`: what the daemon says about it at start.
        case software(note: String?)
        /// The key file and the secret sealed to the TPM that `tcti` names.
        case tpm(tcti: String)
        /// A software-root state moves to the TPM that `tcti` names, keeping everything
        /// (`SoftwareRootMove`), and is then a TPM root's.
        case move(tcti: String)
        /// The daemon does not start: why, and what to do.
        case refuse(String)
    }

    /// `machineTPM`: the TCTI of the machine's TPM when this daemon may open it. `move`: root asked
    /// for a software-root state to move to the TPM root.
    public static func decide(
        setting: Setting,
        recorded: Recorded,
        machineTPM: String?,
        requireTPM: Bool,
        move: Bool = false
    ) -> Decision {
        if move, setting == .off {
            return .refuse("move-to-tpm with tpm = off: name the TPM (--tpm) or set tpm = auto")
        }
        switch (recorded, setting) {
        case (.tpm, .off):
            return .refuse(
                "this state's master secret is sealed to a TPM: tpm = off cannot open it (set tpm = auto or name the TPM)"
            )
        case (.tpm, .auto):
            guard let machineTPM else {
                return .refuse(
                    "this state's master secret is sealed to a TPM, and this machine has none this daemon may use (/dev/tpmrm0 is missing, or this daemon's user is not in group tss): a copied state opens only on its own machine"
                )
            }
            return .tpm(tcti: machineTPM)
        case (.tpm, .tcti(let tcti)):
            return .tpm(tcti: tcti)
        case (.software, .tcti(let tcti)):
            if move { return .move(tcti: tcti) }
            return .refuse(
                "this state was made with the software root: \(moveCommand) seals it to the TPM, keeping everything (or start with tpm = auto or off)"
            )
        case (.software, .auto) where move:
            if let machineTPM { return .move(tcti: machineTPM) }
            if requireTPM { return .refuse("--require-tpm: this machine has no TPM this daemon may use (/dev/tpmrm0)") }
            return .software(
                note:
                    "move-to-tpm: no TPM this daemon may use (/dev/tpmrm0): the state stays on the software root"
            )
        case (.software, let setting):
            if requireTPM { return .refuse("--require-tpm: this state was made with the software root, not a TPM") }
            // Said only where the TPM was asked for and is here: the state keeps its root.
            let note =
                setting == .auto
                ? machineTPM.map { _ in
                    "this state was made with the software root; it stays there (a copy of the state directory and key file opens it anywhere) until root moves it to the TPM: \(moveCommand)"
                } : nil
            return .software(note: note)
        case (.new, .off):
            if requireTPM { return .refuse("--require-tpm with tpm = off") }
            return .software(
                note: "tpm = off: the software root (a copy of the state directory and key file opens it anywhere)"
            )
        case (.new, .auto):
            if let machineTPM { return .tpm(tcti: machineTPM) }
            if requireTPM { return .refuse("--require-tpm: this machine has no TPM this daemon may use (/dev/tpmrm0)") }
            return .software(
                note:
                    "no TPM this daemon may use (/dev/tpmrm0): the software root (a copy of the state directory and key file opens it anywhere)"
            )
        case (.new, .tcti(let tcti)):
            return .tpm(tcti: tcti)
        }
    }

    /// What root runs to move a software-root state to the TPM root.
    public static let moveCommand =
        "stop the daemon and, as its user, run laenclaved --move-to-tpm (or set move-to-tpm = yes)"
}
