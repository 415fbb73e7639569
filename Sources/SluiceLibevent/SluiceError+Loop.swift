import SluiceCore

extension SluiceError.Code {
    /// libevent could not create the `event_base` or its internal events.
    public static let baseCreationFailed = SluiceError.Code(name: "baseCreationFailed")
    /// The loop's thread could not be started.
    public static let threadStartFailed = SluiceError.Code(name: "threadStartFailed")
    /// A listener could not bind its address (in use, not local, bad address).
    public static let bindFailed = SluiceError.Code(name: "bindFailed")
}
