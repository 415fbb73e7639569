/// A decision for a key in a policy table, plus what making room for the key cost.
public struct KeyedDecision: Hashable, Sendable {
    /// The decision for the event.
    public var decision: Decision
    /// A *different* key's held event that was evicted with its state to make room: it will never
    /// run, and the runtime replies to it as dropped.
    public var evictedPending: EventToken?

    /// Creates a keyed decision.
    @inlinable
    public init(decision: Decision, evictedPending: EventToken? = nil) {
        self.decision = decision
        self.evictedPending = evictedPending
    }
}

/// Throttle state for many keys in a budgeted ``KeyTable`` that evicts the least recently used key.
public struct ThrottleTable<Key: Hashable> {
    /// The options every key uses.
    public let options: ThrottleOptions
    /// The per-key states.
    public var table: KeyTable<Key, ThrottleState>

    /// An empty table within `budget`.
    public init(options: ThrottleOptions, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        self.table = try KeyTable(budget: budget, whenFull: .evictLeastRecentlyUsed)
    }

    /// Decides what happens to the event `token` for `key` at `now`.
    @inlinable
    public mutating func event(_ token: EventToken, key: Key, now: Instant) -> KeyedDecision {
        // An evicting table never refuses.
        let slot = try! table.lookup(key, now: now, orInsert: ThrottleState())
        let decision = table[slot.index].event(token, now: now, options: options)
        return KeyedDecision(decision: decision, evictedPending: slot.evicted?.value.pending)
    }

    /// Delivers the timer requested for `key`.
    @inlinable
    public mutating func fire(key: Key, now: Instant) -> FireDecision {
        guard let index = table.index(of: key) else { return .none }
        return table[index].fire(now: now, options: options)
    }

    /// Drops idle keys (see ``KeyTable/sweep(now:maxEntries:)``).
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        table.sweep(now: now, maxEntries: maxEntries)
    }
}

/// Debounce state for many keys in a budgeted ``KeyTable`` that evicts the least recently used key.
public struct DebounceTable<Key: Hashable> {
    /// The options every key uses.
    public let options: DebounceOptions
    /// The per-key states.
    public var table: KeyTable<Key, DebounceState>

    /// An empty table within `budget`.
    public init(options: DebounceOptions, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        self.table = try KeyTable(budget: budget, whenFull: .evictLeastRecentlyUsed)
    }

    /// Decides what happens to the event `token` for `key` at `now`.
    @inlinable
    public mutating func event(_ token: EventToken, key: Key, now: Instant) -> KeyedDecision {
        let slot = try! table.lookup(key, now: now, orInsert: DebounceState())
        let decision = table[slot.index].event(token, now: now, options: options)
        return KeyedDecision(decision: decision, evictedPending: slot.evicted?.value.pending)
    }

    /// Delivers the timer requested for `key`.
    @inlinable
    public mutating func fire(key: Key, now: Instant) -> FireDecision {
        guard let index = table.index(of: key) else { return .none }
        return table[index].fire(now: now, options: options)
    }

    /// Drops idle keys (see ``KeyTable/sweep(now:maxEntries:)``).
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        table.sweep(now: now, maxEntries: maxEntries)
    }
}

/// GCRA state for many keys in a budgeted ``KeyTable`` that evicts the least recently used key
/// (an evicted key starts again with its full burst).
public struct RateLimitTable<Key: Hashable> {
    /// The options every key uses.
    public let options: RateLimitOptions
    /// The per-key states.
    public var table: KeyTable<Key, RateLimitState>

    /// An empty table within `budget`.
    public init(options: RateLimitOptions, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        self.table = try KeyTable(budget: budget, whenFull: .evictLeastRecentlyUsed)
    }

    /// Decides whether `quantity` events for `key` at `now` are allowed, consuming them if so.
    @inlinable
    public mutating func check(key: Key, now: Instant, quantity: Int = 1) -> RateLimitDecision {
        let slot = try! table.lookup(key, now: now, orInsert: RateLimitState())
        return table[slot.index].check(now: now, options: options, quantity: quantity)
    }

    /// Drops idle keys (see ``KeyTable/sweep(now:maxEntries:)``).
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        table.sweep(now: now, maxEntries: maxEntries)
    }
}
