import ArgumentParser
import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The lines of a diagnosis, printed as they are found.
struct DoctorReport {
    private(set) var problems = 0

    mutating func ok(_ check: String, _ detail: String) { line("ok", check, detail) }
    mutating func note(_ check: String, _ detail: String) { line("note", check, detail) }
    mutating func problem(_ check: String, _ detail: String, fix: String) {
        problems += 1
        line("problem", check, detail)
        print(String(repeating: " ", count: 9) + "fix: " + fix)
    }

    private func line(_ marker: String, _ check: String, _ detail: String) {
        print(
            marker.padding(toLength: 8, withPad: " ", startingAt: 0) + " "
                + (check + ":").padding(toLength: 13, withPad: " ", startingAt: 0) + " " + detail
        )
    }
}
