extension KeychainRequest: RequestArguments {
    public func validate() throws(Failure) {
        try ArgumentChecks.context(context)
        try ArgumentChecks.text(reason, "kSecUseOperationPrompt")
        try ArgumentChecks.passcodeLength(
            applicationPassword.map { String(decoding: $0, as: UTF8.self) },
            "application password"
        )
        guard attributes.count <= 64, (changes?.count ?? 0) <= 64 else {
            throw Failure(.invalidParameter, "at most 64 attributes")
        }
    }
}

extension KeyRequest: RequestArguments {
    public func validate() throws(Failure) {
        try ArgumentChecks.context(context)
        try ArgumentChecks.text(reason, "localizedReason")
    }
}
