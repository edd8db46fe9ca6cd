import EnclaveProtocol

/// lactl's `print`: the line with control characters escaped (see `Printable`). Our own terminal
/// formatting goes through `Swift.print` around text that was escaped first.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Swift.print(Printable.escaped(items.map { "\($0)" }.joined(separator: separator)), terminator: terminator)
}
