// The entry point our libFuzzer targets share. Built with -DFUZZING (scripts/fuzz-webauthn,
// scripts/fuzz-keychain) it hands the process to libFuzzer's driver with the target the
// environment names; otherwise it replays the files and directories it is given through every
// target (the committed corpora, a crash libFuzzer wrote).

import Foundation

public enum FuzzMain {
    public static func run<Target: RawRepresentable & CaseIterable>(
        _: Target.Type,
        variable: String,
        default fallback: Target,
        _ body: @escaping @Sendable (Target, Data) -> Void
    ) throws -> Never where Target.RawValue == String {
        #if FUZZING
        let selected = Target(rawValue: ProcessInfo.processInfo.environment[variable] ?? "") ?? fallback
        current = { body(selected, $0) }
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(
            LLVMFuzzerRunDriver(&argc, &argv) { bytes, count in
                current?(bytes.map { Data(bytes: $0, count: count) } ?? Data())
                return 0
            }
        )
        #else
        var files = 0
        for path in CommandLine.arguments.dropFirst() {
            let url = URL(fileURLWithPath: path)
            let paths =
                (try? FileManager.default.contentsOfDirectory(atPath: path))?.map {
                    url.appendingPathComponent($0).path
                } ?? [path]
            for file in paths {
                let data = try Data(contentsOf: URL(fileURLWithPath: file))
                for target in Target.allCases { body(target, data) }
                files += 1
            }
        }
        print("replayed \(files) inputs through \(Target.allCases.count) targets: no crash")
        exit(0)
        #endif
    }
}

#if FUZZING
/// The selected target, for libFuzzer's C callback (which captures nothing); set once, before
/// the driver starts, and only read afterwards.
nonisolated(unsafe) private var current: ((Data) -> Void)?

// libFuzzer's own driver, entered from our main: SwiftPM gives an executable's entry point its own
// name, so libFuzzer's `main` cannot be the program's.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32
#endif
