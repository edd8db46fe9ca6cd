import Foundation
import LocalAuthentication
import TouchLoginAPI
import TouchLoginClient

#if canImport(Glibc)
import Glibc
#endif

func say(_ text: String) {
    print(text)
    fflush(nil)
}
func sayError(_ text: String) { FileHandle.standardError.write(Data(("touchlogin: " + text + "\n").utf8)) }

/// Questions on the terminal (echo off for secrets), or lines from standard input when piped.
enum Terminal {
    static func ask(_ question: String) -> String? {
        print(question, terminator: "")
        fflush(nil)
        guard let line = readLine(strippingNewline: true) else { return nil }
        let answer = line.trimmingCharacters(in: .whitespaces)
        return answer.isEmpty ? nil : answer
    }

    static func confirm(_ question: String) -> Bool {
        guard let answer = ask(question)?.lowercased() else { return false }
        return answer == "y" || answer == "yes"
    }

    static func secret(_ question: String) -> String? {
        guard isatty(STDIN_FILENO) == 1 else {
            print(question, terminator: "")
            fflush(nil)
            let line = readLine(strippingNewline: true)
            print("")
            return (line?.isEmpty ?? true) ? nil : line
        }
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            print("")
        }
        print(question, terminator: "")
        fflush(nil)
        let line = readLine(strippingNewline: true)
        return (line?.isEmpty ?? true) ? nil : line
    }
}
