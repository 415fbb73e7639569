import SluiceCore

extension SluiceError.Code {
    /// Two plugins (or two front routes) claim the same name or verb.
    public static let duplicatePlugin = SluiceError.Code(name: "duplicatePlugin")
    /// A plugin's name (or a front route's verb) is malformed.
    public static let invalidPlugin = SluiceError.Code(name: "invalidPlugin")
    /// A plugin handle from another registry was used with this gate.
    public static let foreignPlugin = SluiceError.Code(name: "foreignPlugin")
    /// A plugin was registered after a gate was made from its registry: the gate would not know
    /// it.
    public static let registryInUse = SluiceError.Code(name: "registryInUse")
}
