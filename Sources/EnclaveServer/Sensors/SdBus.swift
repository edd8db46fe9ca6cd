import CSdBus
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One D-Bus connection through sd-bus, for the fprintd sensor: blocking method calls with string
/// arguments, and the signals of subscribed interfaces queued as they arrive. sd-bus is not
/// thread-safe: a connection belongs to the one thread that made it. Only sd-bus's non-variadic
/// API is used (Swift cannot call C variadic functions).
final class SdBusConnection {
    struct Signal: Equatable {
        var interface: String
        var member: String
        var strings: [String]
        var flag: Bool?
    }

    private var bus: OpaquePointer?
    private var slots: [OpaquePointer?] = []
    private(set) var signals: [Signal] = []

    /// `address` nil: the system bus (sd-bus honours `$DBUS_SYSTEM_BUS_ADDRESS`).
    init(address: String?) throws {
        if let address {
            try check(sd_bus_new(&bus), "sd_bus_new")
            try check(sd_bus_set_address(bus, address), "sd_bus_set_address")
            try check(sd_bus_set_bus_client(bus, 1), "sd_bus_set_bus_client")
            try check(sd_bus_start(bus), "connecting to \(address)")
        } else {
            try check(sd_bus_open_system(&bus), "connecting to the system bus")
        }
    }

    deinit {
        for slot in slots { sd_bus_slot_unref(slot) }
        sd_bus_flush_close_unref(bus)
    }

    /// Queues every signal of `interface` from `sender` (its string arguments, and a trailing
    /// boolean when there is one).
    func subscribe(sender: String?, interface: String) throws {
        var slot: OpaquePointer?
        let handler: sd_bus_message_handler_t = { message, userdata, _ in
            let me = Unmanaged<SdBusConnection>.fromOpaque(userdata!).takeUnretainedValue()
            me.signals.append(SdBusConnection.signal(from: message))
            return 0
        }
        try check(
            sd_bus_match_signal(
                bus,
                &slot,
                sender,
                nil,
                interface,
                nil,
                handler,
                Unmanaged.passUnretained(self).toOpaque()
            ),
            "subscribing to \(interface)"
        )
        slots.append(slot)
    }

    private static func signal(from message: OpaquePointer?) -> Signal {
        let interface = sd_bus_message_get_interface(message).map { String(cString: $0) } ?? ""
        let member = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
        var strings: [String] = []
        var flag: Bool?
        while true {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            guard sd_bus_message_peek_type(message, &type, &contents) > 0 else { break }
            switch UInt8(bitPattern: type) {
            case UInt8(ascii: "s"), UInt8(ascii: "o"):
                var p: UnsafePointer<CChar>?
                guard sd_bus_message_read_basic(message, type, &p) > 0, let p else {
                    return Signal(interface: interface, member: member, strings: strings, flag: flag)
                }
                strings.append(String(cString: p))
            case UInt8(ascii: "b"):
                var b: Int32 = 0
                guard sd_bus_message_read_basic(message, type, &b) > 0 else {
                    return Signal(interface: interface, member: member, strings: strings, flag: flag)
                }
                flag = b != 0
            default:
                return Signal(interface: interface, member: member, strings: strings, flag: flag)
            }
        }
        return Signal(interface: interface, member: member, strings: strings, flag: flag)
    }

    /// Calls a method whose arguments are all strings, ignoring what it returns.
    func call(
        _ destination: String,
        _ path: String,
        _ interface: String,
        _ member: String,
        _ arguments: [String] = []
    ) throws {
        try call(destination, path, interface, member, arguments, read: { _ in () })
    }

    /// Calls a method whose arguments are all strings; the reply is read by `read`.
    func call<T>(
        _ destination: String,
        _ path: String,
        _ interface: String,
        _ member: String,
        _ arguments: [String] = [],
        timeout: UInt64 = 10_000_000,
        read: (OpaquePointer?) throws -> T
    ) throws -> T {
        try invoke(
            destination,
            path,
            interface,
            member,
            timeout: timeout,
            append: { message in
                for argument in arguments {
                    try check(
                        sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), argument),
                        "arguments of \(member)"
                    )
                }
            },
            read: read
        )
    }

    /// Calls a method whose one argument is a uint32 (logind's `GetUser`).
    func call<T>(
        _ destination: String,
        _ path: String,
        _ interface: String,
        _ member: String,
        uint32 value: UInt32,
        read: (OpaquePointer?) throws -> T
    ) throws -> T {
        try invoke(
            destination,
            path,
            interface,
            member,
            timeout: 10_000_000,
            append: { message in
                var value = value
                try check(
                    sd_bus_message_append_basic(message, CChar(UInt8(ascii: "u")), &value),
                    "arguments of \(member)"
                )
            },
            read: read
        )
    }

    private func invoke<T>(
        _ destination: String,
        _ path: String,
        _ interface: String,
        _ member: String,
        timeout: UInt64,
        append: (OpaquePointer?) throws -> Void,
        read: (OpaquePointer?) throws -> T
    ) throws -> T {
        var message: OpaquePointer?
        try check(
            sd_bus_message_new_method_call(bus, &message, destination, path, interface, member),
            "preparing \(member)"
        )
        defer { sd_bus_message_unref(message) }
        try append(message)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let r = sd_bus_call(bus, message, timeout, &error, &reply)
        if r < 0 {
            throw DaemonError(
                .dbusCallFailed,
                error.message.map { String(cString: $0) } ?? String(cString: strerror(-r)),
                dbusName: error.name.map { String(cString: $0) } ?? "errno.\(-r)"
            )
        }
        defer { sd_bus_message_unref(reply) }
        return try read(reply)
    }

    /// Handles what has arrived, waiting up to `timeout` microseconds for more.
    func process(waiting timeout: UInt64) throws {
        let r = sd_bus_process(bus, nil)
        try check(r, "reading from the bus")
        if r == 0 { try check(sd_bus_wait(bus, timeout), "waiting on the bus") }
    }

    /// Handles everything that has arrived, without waiting.
    func drain() {
        while sd_bus_process(bus, nil) > 0 {}
    }

    /// Removes and returns the first queued signal named `member`.
    func take(_ member: String) -> Signal? {
        guard let i = signals.firstIndex(where: { $0.member == member }) else { return nil }
        return signals.remove(at: i)
    }

    func discardSignals() { signals.removeAll() }

    // MARK: Reading replies

    static func readObjectPath(_ reply: OpaquePointer?) throws -> String {
        var p: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "o")), &p), "reading an object path")
        return p.map { String(cString: $0) } ?? ""
    }

    static func readStrings(_ reply: OpaquePointer?) throws -> [String] {
        try check(sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "a")), "s"), "reading a string array")
        var out: [String] = []
        while true {
            var p: UnsafePointer<CChar>?
            let r = sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "s")), &p)
            try check(r, "reading a string")
            if r == 0 { break }
            out.append(String(cString: p!))
        }
        try check(sd_bus_message_exit_container(reply), "reading a string array")
        return out
    }

    /// The value of a property read with org.freedesktop.DBus.Properties.Get (a variant).
    static func readVariantString(_ reply: OpaquePointer?) throws -> String {
        try check(sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "v")), "s"), "reading a string property")
        var p: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "s")), &p), "reading a string property")
        return p.map { String(cString: $0) } ?? ""
    }

    static func readVariantInt(_ reply: OpaquePointer?) throws -> Int {
        try check(sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "v")), "i"), "reading an integer property")
        var value: Int32 = 0
        try check(sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "i")), &value), "reading an integer property")
        return Int(value)
    }
}

private func check(_ r: Int32, _ what: String) throws {
    if r < 0 {
        throw DaemonError(.dbusCallFailed, "\(what): \(String(cString: strerror(-r)))", dbusName: "errno.\(-r)")
    }
}

extension DaemonError {
    /// A D-Bus error reply (`net.reactivated.Fprint.Error.AlreadyInUse`…) or a transport failure
    /// whose name ends in `suffix`.
    func isDBusError(_ suffix: String) -> Bool { dbusName?.hasSuffix(suffix) ?? false }
}
