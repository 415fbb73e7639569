/// A reply from Redis, copied out of hiredis's reply object.
///
/// An error reply (`-ERR ...`, `-WRONGTYPE ...`, a script's error) is a reply, not a failed
/// call: the command reached the server and was answered. ``RedisCallError`` is for calls that
/// got no answer.
public enum RedisReply: Sendable, Hashable, CustomStringConvertible {
    /// A status reply: `+OK`, `+PONG`, `+QUEUED`.
    case status(String)
    /// An error reply, without its leading `-`: `ERR unknown command`, `WRONGTYPE ...`.
    case error(String)
    /// An integer reply.
    case integer(Int)
    /// A bulk string, as bytes.
    case string([UInt8])
    /// A null bulk string or null array (`GET` of a missing key).
    case null
    /// An array (multi-bulk) reply.
    case array([RedisReply])

    /// The text of a status reply, or a bulk string's bytes as UTF-8 (`nil` when they are not
    /// valid UTF-8); `nil` for the other kinds.
    public var text: String? {
        switch self {
        case .status(let text): text
        case .string(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }

    /// The bytes of a bulk string, or a status reply's UTF-8; `nil` for the other kinds.
    public var bytes: [UInt8]? {
        switch self {
        case .string(let bytes): bytes
        case .status(let text): Array(text.utf8)
        default: nil
        }
    }

    /// The value of an integer reply.
    public var int: Int? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The elements of an array reply.
    public var array: [RedisReply]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// Whether this is an error reply.
    public var isError: Bool {
        if case .error = self { return true }
        return false
    }

    /// The message of an error reply.
    public var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }

    /// Whether this is a null reply.
    public var isNull: Bool { self == .null }

    /// Whether this is the status reply `OK`.
    public var isOK: Bool { self == .status("OK") }

    /// The reply in Redis's wire spelling, shortened: `+OK`, `-ERR ...`, `:1`, `"text"`,
    /// `(nil)`, `[...]`.
    public var description: String {
        switch self {
        case .status(let text): "+\(text)"
        case .error(let message): "-\(message)"
        case .integer(let value): ":\(value)"
        case .string(let bytes): "\"\(String(decoding: bytes, as: UTF8.self))\""
        case .null: "(nil)"
        case .array(let elements): "[\(elements.map(\.description).joined(separator: ", "))]"
        }
    }
}
