/// An error from the gate runtime: a code, a message and the offending value (the pattern of
/// swift-service-lifecycle's `ServiceGroupError`).
public struct GateError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable, comparable code.
    ///
    /// The gate's own codes are here; a front adds the codes of its own words (the line front's
    /// `reservedVerb`, the HTTP front's `reservedPath`) where they are defined.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        /// A code named `name`, for the modules of this package that add their own.
        package init(name: String) {
            self.name = name
        }

        /// Two plugins (or two front routes) claim the same name or verb.
        public static let duplicatePlugin = Code(name: "duplicatePlugin")
        /// A plugin's name (or a front route's verb) is malformed.
        public static let invalidPlugin = Code(name: "invalidPlugin")
        /// An option is out of range, or a budget too small for a table.
        public static let invalidConfiguration = Code(name: "invalidConfiguration")
        /// A plugin handle from another registry was used with this gate.
        public static let foreignPlugin = Code(name: "foreignPlugin")
        /// A plugin was registered after a gate was made from its registry: the gate would not
        /// know it.
        public static let registryInUse = Code(name: "registryInUse")
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let message: String
    /// The offending value.
    public let value: String

    /// Creates an error.
    public init(code: Code, message: String, value: String) {
        self.code = code
        self.message = message
        self.value = value
    }

    public var description: String { "GateError(\(code)): \(message) [\(value)]" }
}
