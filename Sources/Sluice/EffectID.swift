/// Names a kind of effect for cancellation, as TCA's `cancellable(id:)` does: any `Hashable`
/// and `Sendable` value the caller chooses (a string, an enum case, a type), compared by value.
///
/// ```swift
/// enum CancelID { case search, upload }
/// let request = gate.request(search, query, id: EffectID(CancelID.search), in: session)
/// await gate.cancel(id: CancelID.search, in: session)
/// ```
///
/// A plugin's requests use the plugin's name as their ID unless the caller gives another.
public struct EffectID: Hashable, @unchecked Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    // @unchecked Sendable: `base` wraps a value the initialisers require to be `Sendable`;
    // `AnyHashable` itself is not marked `Sendable`, but it only stores and compares that value.

    /// The wrapped value.
    public let base: AnyHashable

    /// An ID wrapping `value` (an `EffectID` is not wrapped twice).
    public init<Value: Hashable & Sendable>(_ value: Value) {
        if let id = value as? EffectID {
            self = id
        } else {
            base = AnyHashable(value)
        }
    }

    /// An ID from a string literal.
    public init(stringLiteral value: String) {
        base = AnyHashable(value)
    }

    public var description: String { "\(base)" }
}
