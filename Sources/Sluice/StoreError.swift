/// A shared store did not answer: it is unreachable, slower than its timeout, or answered
/// something it should not have. What happens next is the plugin's ``StoreFailureMode``.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// The store cannot be reached (not connected, the connection was lost).
        public static let unavailable = Code(name: "unavailable")
        /// No answer within the store's timeout.
        public static let timeout = Code(name: "timeout")
        /// An answer the store's protocol does not allow (a script error, a malformed reply).
        public static let protocolError = Code(name: "protocolError")
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let message: String
    /// The offending value (a key, a reply).
    public let value: String

    /// Creates an error.
    public init(code: Code, message: String, value: String = "") {
        self.code = code
        self.message = message
        self.value = value
    }

    public var description: String { "StoreError(\(code)): \(message) [\(value)]" }
}
