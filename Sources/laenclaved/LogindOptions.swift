import ArgumentParser

/// Where logind's session records are read (`DaemonConfiguration.logindDirectory`): for the PAM
/// module's tests, which state a session of their own on a machine without logind.
struct LogindOptions: ParsableArguments {
    @Option(name: .customLong("logind-directory"), help: .hidden)
    var logindDirectory: String?
}
