/// An error raised by SluiceCore: invalid options, or a table that cannot take a new key.
///
/// Modelled on swift-service-lifecycle's `ServiceGroupError`: a stable ``Code`` to switch on, a
/// human-readable ``message`` and the offending ``value`` rendered as text.
public struct SluiceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        @usableFromInline
        enum Base: Hashable, Sendable {
            case invalidOption
            case tableBusy
            case unknownScope
        }

        @usableFromInline
        let base: Base

        @inlinable
        init(_ base: Base) { self.base = base }

        /// An option was out of range (an interval ≤ 0, a burst < 0, a budget too small…).
        public static let invalidOption = Code(.invalidOption)
        /// A table that refuses rather than evicts (idempotency) is full of live records.
        public static let tableBusy = Code(.tableBusy)
        /// A cancellation scope was used after it was closed, or never existed.
        public static let unknownScope = Code(.unknownScope)

        public var description: String {
            switch base {
            case .invalidOption: "invalidOption"
            case .tableBusy: "tableBusy"
            case .unknownScope: "unknownScope"
            }
        }
    }

    /// The error's code.
    public let code: Code
    /// A sentence saying what was wrong and what is accepted.
    public let message: String
    /// The offending value, rendered as text (e.g. `"-1.0 seconds"`, `"capacity 0"`).
    public let value: String

    /// Creates an error.
    public init(code: Code, message: String, value: String) {
        self.code = code
        self.message = message
        self.value = value
    }

    /// An invalid-option error for `value`.
    public static func invalidOption(_ message: String, value: some Any) -> SluiceError {
        SluiceError(code: .invalidOption, message: message, value: String(describing: value))
    }

    /// A table-busy error naming the table's capacity.
    public static func tableBusy(capacity: Int) -> SluiceError {
        SluiceError(
            code: .tableBusy,
            message: "The table is full of live records and refuses new keys until some expire.",
            value: "capacity \(capacity)"
        )
    }

    public var description: String {
        "SluiceError(\(code)): \(message) (value: \(value))"
    }
}
