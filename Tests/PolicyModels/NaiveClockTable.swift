import SluiceCore

/// A naive ``KeyTable`` with an entry capacity: an array of (key, value, visited) in the table's
/// storage order, searched linearly, with the clock hand and the sweep's cursor as plain
/// positions. A new key that needs room takes the place of the entry the hand points at; any other
/// removal moves the last entry into the hole, as the real table's dense storage does.
/// Each call says what the real table must do.
///
/// The reference of the property tests and of the table fuzz target.
public struct NaiveClockTable<Key: Hashable, Value: KeyedState & Equatable> {
    public struct Entry {
        public var key: Key
        public var value: Value
        public var visited: Bool
    }

    public let capacity: Int
    public let refuse: Bool
    public var entries: [Entry] = []
    public var hand = 0
    public var sweepCursor = 0

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

    /// The keys in storage order.
    public var keys: [Key] { entries.map(\.key) }

    /// Finds `key` (marking it visited; an idle value becomes `fresh`) or inserts `fresh` for it.
    public mutating func lookup(_ key: Key, now: Instant, fresh: Value) -> Lookup {
        if let i = entries.firstIndex(where: { $0.key == key }) {
            entries[i].visited = true
            if entries[i].value.isIdle(at: now) { entries[i].value = fresh }
            return .stored(evicted: nil)
        }
        var swept = false
        while entries.count == capacity {
            // The hand passes over visited entries, clearing their bit.
            if hand >= entries.count { hand = 0 }
            while entries[hand].visited {
                entries[hand].visited = false
                hand = (hand + 1) % entries.count
            }
            // The candidate if it is idle; else the first idle entry among the next 64 (the hand
            // moves there); else whatever a sweep of 64 drops; else the candidate, evicted,
            // unless the table refuses.
            var victim = hand
            if !entries[hand].value.isIdle(at: now) {
                let ahead = (1..<Swift.max(1, Swift.min(KeyTable<Key, Value>.sweepBeforeEviction + 1, entries.count)))
                    .map { (hand + $0) % entries.count }
                if let idle = ahead.first(where: { entries[$0].value.isIdle(at: now) }) {
                    victim = idle
                } else if !swept {
                    swept = true
                    if sweep(now: now, maxEntries: KeyTable<Key, Value>.sweepBeforeEviction) > 0 { continue }
                    if refuse { return .refused }
                } else if refuse {
                    return .refused
                }
            }
            let replaced = entries[victim]
            // The new key takes the victim's place; the hand steps past it.
            entries[victim] = Entry(key: key, value: fresh, visited: false)
            hand = victim + 1
            return .stored(evicted: replaced.value.isIdle(at: now) ? nil : (replaced.key, replaced.value))
        }
        entries.append(Entry(key: key, value: fresh, visited: false))
        return .stored(evicted: nil)
    }

    /// Removes the entry at `position`; the last entry moves into its place.
    public mutating func remove(at position: Int) -> (key: Key, value: Value) {
        let removed = entries[position]
        entries[position] = entries[entries.count - 1]
        entries.removeLast()
        return (removed.key, removed.value)
    }

    /// Removes `key`, returning its value.
    public mutating func remove(_ key: Key) -> Value? {
        entries.firstIndex { $0.key == key }.map { remove(at: $0).value }
    }

    /// Marks `key` visited.
    public mutating func touch(_ key: Key) {
        if let i = entries.firstIndex(where: { $0.key == key }) { entries[i].visited = true }
    }

    /// The sweep: examines up to `maxEntries` entries from the cursor, dropping idle ones; one of
    /// the whole table examines each entry once, from the top.
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        var examined = 0
        var removed = 0
        if maxEntries >= entries.count { sweepCursor = entries.count }
        let limit = Swift.min(maxEntries, entries.count)
        while examined < limit, !entries.isEmpty {
            if sweepCursor <= 0 || sweepCursor > entries.count { sweepCursor = entries.count }
            sweepCursor -= 1
            if entries[sweepCursor].value.isIdle(at: now) {
                _ = remove(at: sweepCursor)
                removed += 1
            }
            examined += 1
        }
        return removed
    }

    /// Whether `key` is held.
    public func contains(_ key: Key) -> Bool { entries.contains { $0.key == key } }

    /// `key`'s value, if held.
    public func value(of key: Key) -> Value? { entries.first { $0.key == key }?.value }
}
