/// A decision for a key in a policy table, plus what making room for the key cost.
public struct KeyedDecision: Hashable, Sendable {
    /// The decision for the event.
    public var decision: Decision
    /// Held events of *other* keys that were evicted with their state to make room: they will
    /// never run, and the runtime replies to them as dropped.
    public var evictedPending: [EventToken]

    /// Creates a keyed decision.
    @inlinable
    public init(decision: Decision, evictedPending: [EventToken] = []) {
        self.decision = decision
        self.evictedPending = evictedPending
    }
}

/// The state of a policy that holds events and requests timers (throttle, debounce): what the
/// keyed table and the single-key wrapper need of it.
public protocol TimedPolicyState: KeyedState {
    /// The options every decision takes.
    associatedtype Options
    /// A state with no history.
    init()
    /// Decides what happens to the event `token` arriving at `now`.
    mutating func event(_ token: EventToken, now: Instant, options: Options) -> Decision
    /// Delivers a timer requested earlier.
    mutating func fire(now: Instant, options: Options) -> FireDecision
    /// The held event, if any.
    var pending: EventToken? { get }
}

extension ThrottleState: TimedPolicyState {}
extension DebounceState: TimedPolicyState {}

/// Throttle state for many keys in a budgeted ``KeyTable`` that evicts the least recently used key.
public typealias ThrottleTable<Key: Hashable> = TimedTable<Key, ThrottleState>

/// Debounce state for many keys in a budgeted ``KeyTable`` that evicts the least recently used key.
public typealias DebounceTable<Key: Hashable> = TimedTable<Key, DebounceState>

/// The states of a timed policy (``ThrottleTable``, ``DebounceTable``) for many keys in a budgeted
/// ``KeyTable`` that evicts the least recently used key.
public struct TimedTable<Key: Hashable, State: TimedPolicyState> {
    /// The options every key uses.
    public let options: State.Options
    /// The per-key states.
    public var table: KeyTable<Key, State>

    /// An empty table within `budget`.
    public init(options: State.Options, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        self.table = try KeyTable(budget: budget, whenFull: .evictLeastRecentlyUsed)
    }

    /// Decides what happens to the event `token` for `key` at `now`.
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` only when the key alone is larger than what the
    ///   budget leaves (an evicting table otherwise makes room).
    @inlinable
    public mutating func event(_ token: EventToken, key: Key, now: Instant) throws(SluiceError) -> KeyedDecision {
        let slot = try table.lookup(key, now: now, orInsert: State())
        let decision = table[slot.index].event(token, now: now, options: options)
        return KeyedDecision(decision: decision, evictedPending: slot.evicted.compactMap { $0.value.pending })
    }

    /// `key`'s state, if the table holds one.
    @inlinable
    public func state(of key: Key) -> State? {
        table.index(of: key).map { table[$0] }
    }

    /// Puts back the state `key` had just before an event that ran at once (a fresh state when
    /// it had none): the run was refused elsewhere (a later limit), so the window it opened
    /// never opened. Only for the same instant, with no event of the key in between.
    @inlinable
    public mutating func restore(key: Key, to state: State?) {
        guard let index = table.index(of: key) else { return }
        table[index] = state ?? State()
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
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` only when the key alone is larger than what the
    ///   budget leaves (an evicting table otherwise makes room).
    @inlinable
    public mutating func check(key: Key, now: Instant, quantity: Int = 1) throws(SluiceError) -> RateLimitDecision {
        let slot = try table.lookup(key, now: now, orInsert: RateLimitState())
        return table[slot.index].check(now: now, options: options, quantity: quantity)
    }

    /// Gives back `quantity` events a check of `key` allowed and that were then not used (see
    /// ``RateLimitState/refund(quantity:now:options:)``).
    @inlinable
    public mutating func refund(key: Key, quantity: Int, now: Instant) {
        guard let index = table.index(of: key) else { return }
        table[index].refund(quantity: quantity, now: now, options: options)
    }

    /// Drops idle keys (see ``KeyTable/sweep(now:maxEntries:)``).
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        table.sweep(now: now, maxEntries: maxEntries)
    }
}

/// A per-key counter that a plugin keeps in its shard (how many taps of a key ran, …). A count
/// is never idle: a table of them evicts the least recently used key when its budget is spent,
/// and that key counts from zero again.
public struct TallyState: KeyedState, Hashable, Sendable {
    /// The count.
    public var count: Int

    /// A count of zero.
    @inlinable
    public init() {
        count = 0
    }

    /// A count is always live.
    @inlinable
    public func isIdle(at now: Instant) -> Bool { false }
}

extension KeyTable where Value == TallyState {
    /// Adds `amount` to `key`'s count (inserting the key at 0 first) and returns the new count;
    /// 0 when the key alone is larger than what the budget leaves.
    @inlinable
    public mutating func incrementCount(of key: Key, by amount: Int, now: Instant) -> Int {
        guard let slot = try? lookup(key, now: now, orInsert: TallyState()) else { return 0 }
        self[slot.index].count &+= amount
        return self[slot.index].count
    }
}
