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
///
/// An ID is one reference to its value and the value's hash, made once: copying it (each
/// request, each running effect carries one) is a retain, and comparing two copies of one ID
/// compares one pointer.
public struct EffectID: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    @usableFromInline
    final class Storage: Sendable {
        // nonisolated(unsafe): the initialisers only store values that are `Sendable`;
        // `AnyHashable` is not marked `Sendable` but only stores and compares that value.
        @usableFromInline nonisolated(unsafe) let base: AnyHashable
        @usableFromInline let hash: Int

        init(_ base: AnyHashable) {
            self.base = base
            self.hash = base.hashValue
        }
    }

    @usableFromInline let storage: Storage

    /// The wrapped value.
    public var base: AnyHashable { storage.base }

    /// An ID wrapping `value` (an `EffectID` is not wrapped twice).
    public init<Value: Hashable & Sendable>(_ value: Value) {
        if let id = value as? EffectID {
            self = id
        } else {
            storage = Storage(AnyHashable(value))
        }
    }

    /// An ID from a string literal.
    public init(stringLiteral value: String) {
        storage = Storage(AnyHashable(value))
    }

    @inlinable
    public static func == (lhs: EffectID, rhs: EffectID) -> Bool {
        lhs.storage === rhs.storage || (lhs.storage.hash == rhs.storage.hash && lhs.storage.base == rhs.storage.base)
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.hash)
    }

    public var description: String { "\(storage.base)" }
}
