/// An error from the gate runtime: a code, a message and the offending value (the pattern of
/// swift-service-lifecycle's `ServiceGroupError`).
public struct GateError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// Two plugins (or two front routes) claim the same name or verb.
        public static let duplicatePlugin = Code(name: "duplicatePlugin")
        /// A front route claims a verb the front answers itself.
        public static let reservedVerb = Code(name: "reservedVerb")
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
