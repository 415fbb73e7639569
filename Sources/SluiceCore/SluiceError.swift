/// The error of every Sluice layer: invalid options and configurations, a table that cannot take
/// a new key, a loop or a listener that could not start, a plugin or a route that cannot be
/// registered.
///
/// Modelled on swift-service-lifecycle's `ServiceGroupError`: a stable ``Code`` to switch on, a
/// human-readable ``message`` and the offending ``value`` rendered as text. The codes of this
/// module are below; each layer adds the codes of its own words where they are defined (the
/// loop's `bindFailed`, the gate's `duplicatePlugin`, the line front's `reservedVerb`, …), so
/// one `catch let error as SluiceError` sees them all.
public struct SluiceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        /// A code named `name`, for the modules of this package that add their own.
        package init(name: String) {
            self.name = name
        }

        /// An option was out of range (an interval ≤ 0, a burst < 0, a budget too small for a
        /// table, a port out of range…).
        public static let invalidOption = Code(name: "invalidOption")
        /// A table that refuses rather than evicts (idempotency) is full of live records, or a
        /// remembering table's summary of evicted keys overflowed and cannot decide a key.
        public static let tableBusy = Code(name: "tableBusy")
        /// A cancellation scope was used after it was closed, or never existed.
        public static let unknownScope = Code(name: "unknownScope")

        public var description: String { name }
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

    /// A table-busy error for a key that a table's summary of evicted keys cannot decide: only
    /// an overflow marker answers for it, until `until`.
    public static func summaryOverflowed(until: Instant) -> SluiceError {
        SluiceError(
            code: .tableBusy,
            message: "The table's summary of evicted keys overflowed and cannot tell whether this key is restricted.",
            value: "until \(until.nanoseconds) ns"
        )
    }

    public var description: String {
        "SluiceError(\(code)): \(message) (value: \(value))"
    }
}
