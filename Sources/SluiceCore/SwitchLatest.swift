/// Switch-latest bookkeeping (TCA's `cancellable(id:cancelInFlight: true)`): a new event for a key
/// cancels the running effect of the same effect ID for that key before its own effect starts.
public struct SwitchLatest<Key: Hashable, EffectID: Hashable> {
    @usableFromInline
    struct Slot: Hashable {
        @usableFromInline var key: Key
        @usableFromInline var effect: EffectID
        @inlinable init(key: Key, effect: EffectID) {
            self.key = key
            self.effect = effect
        }
    }

    @usableFromInline var running: [Slot: EventToken] = [:]

    /// Nothing running.
    public init() {}

    /// Effects running.
    public var count: Int { running.count }

    /// The effect running for `key` under `effect`, if any.
    public func running(key: Key, effect: EffectID) -> EventToken? {
        running[Slot(key: key, effect: effect)]
    }

    /// Records that `token`'s effect starts for `key` under `effect`.
    ///
    /// - Returns: the effect to cancel first (the one it replaces), if any.
    @inlinable
    public mutating func start(_ token: EventToken, key: Key, effect: EffectID) -> EventToken? {
        running.updateValue(token, forKey: Slot(key: key, effect: effect))
    }

    /// Records that `token`'s effect ended (completed or cancelled).
    ///
    /// - Returns: whether `token` was the running effect (false if it had already been replaced).
    @inlinable
    @discardableResult
    public mutating func finished(_ token: EventToken, key: Key, effect: EffectID) -> Bool {
        let slot = Slot(key: key, effect: effect)
        guard running[slot] == token else { return false }
        running[slot] = nil
        return true
    }
}

extension SwitchLatest: Sendable where Key: Sendable, EffectID: Sendable {}
extension SwitchLatest.Slot: Sendable where Key: Sendable, EffectID: Sendable {}
