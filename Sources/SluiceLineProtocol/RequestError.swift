/// A request the plugin could not parse: replied as `<id> ERR usage <VERB>` or
/// `<id> ERR <code>`.
public struct RequestError: Error, Sendable, Hashable {
    /// The code after `ERR`, or `nil` for a usage error.
    public let code: String?
    /// A human-readable explanation, for logs.
    public let message: String

    /// The arguments do not fit the verb's usage: `ERR usage <VERB>`.
    public static let usage = RequestError(code: nil, message: "usage")

    /// A specific error: `ERR <code>` (lower-case, dash-separated, e.g. `bad-amount`).
    public static func invalid(_ code: String, message: String) -> RequestError {
        RequestError(code: code, message: message)
    }
}
