extension HandoffServer {
    /// What a connection may hold that nobody received, and so where it is closed.
    enum Holding {
        /// Nothing: the kernel refused descriptors on it (never told ready). Closed here.
        case nothing
        /// Descriptors with any bytes left unread (told ready): closed in the user's turn if any
        /// bytes are left.
        case unread
        /// Descriptors sent unasked, where the kernel cannot refuse them (before Linux 6.16, or a
        /// connection made before the listener refused them): closed in the user's turn if a
        /// look at what is left finds descriptors (bytes alone are closed here, so a flood of
        /// them holds nothing).
        case unasked
    }
}
