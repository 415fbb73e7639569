/// A bad option value or a failed run step, with the offending input.
public struct LoadError: Error, Hashable, CustomStringConvertible {
    /// What is wrong.
    public let message: String
    /// The input that caused it.
    public let input: String

    public init(_ message: String, input: String) {
        self.message = message
        self.input = input
    }

    public var description: String { input.isEmpty ? message : "\(message) (got \"\(input)\")" }
}
