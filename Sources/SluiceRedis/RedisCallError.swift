/// Why a call to Redis got no reply: a code, and a message for logs.
///
/// Callers decide on the code (fall back, fail the request) and log the message.
public struct RedisCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// No usable connection: not connected yet, connecting failed, the connection was lost
        /// before the reply arrived, or it was closed. Such a call fails at once, without waiting
        /// for a reconnect.
        public static let unavailable = Code(name: "unavailable")
        /// No reply within the connection's timeout. The command may still have run on the
        /// server.
        public static let timeout = Code(name: "timeout")
        /// The command was refused before it was sent: it is empty, or it would change the
        /// connection itself (its database, its protocol, subscriptions, `MONITOR`,
        /// `CLIENT REPLY`) so that replies could no longer be matched with calls.
        public static let invalidCommand = Code(name: "invalidCommand")
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "RedisCallError(\(code)): \(message)" }
}
