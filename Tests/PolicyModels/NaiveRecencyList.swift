import SluiceCore

/// A naive ``KeyTable`` with an entry capacity: an array of (key, value) from the most to the
/// least recently used, searched linearly. Each call says what the real table must do.
///
/// The reference of the property tests and of the table fuzz target. With at most a handful of
/// entries, the real table's sweep before an eviction sees every entry, as this model assumes.
public struct NaiveRecencyList<Key: Hashable, Value: KeyedState & Equatable> {
    public let capacity: Int
    public let refuse: Bool
    public var entries: [(key: Key, value: Value)] = []

    public init(capacity: Int, refuse: Bool) {
        self.capacity = capacity
        self.refuse = refuse
    }

    /// What a lookup (or an insert of an absent key) must do.
    public enum Lookup {
        /// Found or inserted; `evicted` is the live entry evicted for room, if any.
        case stored(evicted: (key: Key, value: Value)?)
        /// A refusing table full of live keys refuses the new key.
        case refused
    }

    /// Finds `key` (an idle value becomes `fresh`) or inserts `fresh` for it.
    public mutating func lookup(_ key: Key, now: Instant, fresh: Value) -> Lookup {
        if let i = entries.firstIndex(where: { $0.key == key }) {
            var entry = entries.remove(at: i)
            if entry.value.isIdle(at: now) { entry.value = fresh }
            entries.insert(entry, at: 0)
            return .stored(evicted: nil)
        }
        var evicted: (key: Key, value: Value)? = nil
        if entries.count == capacity {
            if let last = entries.last, last.value.isIdle(at: now) {
                entries.removeLast()
            } else if entries.contains(where: { $0.value.isIdle(at: now) }) {
                // Before a live key is evicted or the new key refused, a sweep drops idle keys.
                entries.removeAll { $0.value.isIdle(at: now) }
            } else if !refuse {
                evicted = entries.removeLast()
            } else {
                return .refused
            }
        }
        entries.insert((key, fresh), at: 0)
        return .stored(evicted: evicted)
    }

    /// Removes `key`, returning its value.
    public mutating func remove(_ key: Key) -> Value? {
        entries.firstIndex { $0.key == key }.map { entries.remove(at: $0).value }
    }

    /// Whether `key` is held.
    public func contains(_ key: Key) -> Bool { entries.contains { $0.key == key } }
}
