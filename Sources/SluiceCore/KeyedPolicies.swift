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
public protocol TimedPolicyState: RestrictingState {
    /// The options every decision takes.
    associatedtype Options: KeyedTableOptions
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

extension DebounceState: RestrictingState {
    /// A debounce delays its key's events rather than refusing them: nothing to remember.
    @inlinable
    public func restriction(at now: Instant) -> Instant? { nil }

    /// A fresh state.
    @inlinable
    public init(restrictedUntil until: Instant) {
        self.init()
    }
}

/// Throttle state for many keys in a budgeted ``KeyTable``.
public typealias ThrottleTable<Key: Hashable> = TimedTable<Key, ThrottleState>

/// Debounce state for many keys in a budgeted ``KeyTable``.
public typealias DebounceTable<Key: Hashable> = TimedTable<Key, DebounceState>

/// The states of a timed policy (``ThrottleTable``, ``DebounceTable``) for many keys in a budgeted
/// ``KeyTable``; when it is full of live keys it does what the options' ``KeyedTableOptions/whenFull``
/// says (see ``WhenTableFull``). Its clock never goes back: an instant earlier than one it was
/// called with counts as that one (see ``EvictionSummary/monotonic(_:)``).
public struct TimedTable<Key: Hashable, State: TimedPolicyState>: SummarizedTable {
    /// The options every key uses.
    public let options: State.Options
    /// The per-key states.
    public var table: KeyTable<Key, State>
    /// What the table remembers of the live keys it evicted.
    public var summary: EvictionSummary

    /// An empty table within `budget` (its summary included).
    public init(options: State.Options, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        let split = budget.split(remembering: options.whenFull == .remember)
        self.table = try KeyTable(budget: split.table, whenFull: options.whenFull == .refuse ? .refuse : .evict)
        self.summary = try EvictionSummary(options: options, bytes: split.summaryBytes)
    }

    /// Decides what happens to the event `token` for `key` at `now`.
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` when the table refuses new keys while full of live
    ///   ones (``WhenTableFull/refuse``), when the key alone is larger than what the budget
    ///   leaves, or, for a table that remembers, when its summary overflowed and cannot decide
    ///   the key (see ``WhenTableFull``). Nothing is evicted for a key refused so.
    @inlinable
    public mutating func event(_ token: EventToken, key: Key, now: Instant) throws(SluiceError) -> KeyedDecision {
        // Not a call of the hashed variant: left out of line, that call cost a fifth of a
        // decision at 1,000 keys (measured, 26 against 34 ns).
        let now = summary.monotonic(now)
        let (slot, restored) = try entry(key, hash: KeySlotPrefetcher.hash(key), now: now, fresh: State())
        return decide(token, in: slot, restored: restored, now: now)
    }

    /// ``event(_:key:now:)`` for a key already hashed (see ``KeySlotPrefetcher``).
    ///
    /// - Precondition: `hash == KeySlotPrefetcher.hash(key)`.
    @inlinable
    public mutating func event(_ token: EventToken, key: Key, hash: UInt32, now: Instant) throws(SluiceError) -> KeyedDecision {
        let now = summary.monotonic(now)
        let (slot, restored) = try entry(key, hash: hash, now: now, fresh: State())
        return decide(token, in: slot, restored: restored, now: now)
    }

    /// The event `token` decided by the key's state at `slot`.
    @inlinable
    mutating func decide(
        _ token: EventToken, in slot: KeyTable<Key, State>.Insertion, restored: Bool, now: Instant
    ) -> KeyedDecision {
        let decision = table[slot.index].event(token, now: now, options: options)
        if restored, case .drop = decision { summary.countRefusal() }
        if slot.evicted.isEmpty { return KeyedDecision(decision: decision) }
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
        let now = summary.monotonic(now)
        guard let index = table.index(of: key) else { return .none }
        return table[index].fire(now: now, options: options)
    }

}

/// GCRA state for many keys in a budgeted ``KeyTable``; when it is full of live keys it does
/// what ``RateLimitOptions/whenFull`` says (by default it remembers the keys it evicts, so an
/// evicted key does not start again with its full burst; see ``WhenTableFull``). Its clock never
/// goes back: an instant earlier than one it was called with counts as that one (see
/// ``EvictionSummary/monotonic(_:)``).
public struct RateLimitTable<Key: Hashable>: SummarizedTable {
    /// The options every key uses.
    public let options: RateLimitOptions
    /// The per-key states.
    public var table: KeyTable<Key, RateLimitState>
    /// What the table remembers of the live keys it evicted.
    public var summary: EvictionSummary

    /// An empty table within `budget` (its summary included).
    public init(options: RateLimitOptions, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        let split = budget.split(remembering: options.whenFull == .remember)
        self.table = try KeyTable(budget: split.table, whenFull: options.whenFull == .refuse ? .refuse : .evict)
        self.summary = try EvictionSummary(options: options, bytes: split.summaryBytes)
    }

    /// Decides whether `quantity` events for `key` at `now` are allowed, consuming them if so.
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` when the table refuses new keys while full of live
    ///   ones (``WhenTableFull/refuse``), when the key alone is larger than what the budget
    ///   leaves, or, for a table that remembers, when its summary overflowed and cannot decide
    ///   the key (see ``WhenTableFull``). Nothing is evicted for a key refused so.
    @inlinable
    public mutating func check(key: Key, now: Instant, quantity: Int = 1) throws(SluiceError) -> RateLimitDecision {
        // Not a call of the hashed variant, as in ``TimedTable/event(_:key:now:)``.
        let now = summary.monotonic(now)
        let (slot, restored) = try entry(key, hash: KeySlotPrefetcher.hash(key), now: now, fresh: RateLimitState())
        return decide(quantity, in: slot, restored: restored, now: now)
    }

    /// ``check(key:now:quantity:)`` for a key already hashed (see ``KeySlotPrefetcher``).
    ///
    /// - Precondition: `hash == KeySlotPrefetcher.hash(key)`.
    @inlinable
    public mutating func check(key: Key, hash: UInt32, now: Instant, quantity: Int = 1) throws(SluiceError) -> RateLimitDecision {
        let now = summary.monotonic(now)
        let (slot, restored) = try entry(key, hash: hash, now: now, fresh: RateLimitState())
        return decide(quantity, in: slot, restored: restored, now: now)
    }

    /// `quantity` events decided by the key's state at `slot`.
    @inlinable
    mutating func decide(
        _ quantity: Int, in slot: KeyTable<Key, RateLimitState>.Insertion, restored: Bool, now: Instant
    ) -> RateLimitDecision {
        let decision = table[slot.index].check(now: now, options: options, quantity: quantity)
        if restored, !decision.allowed { summary.countRefusal() }
        return decision
    }

    /// ``check(key:now:quantity:)`` for one event when only the verdict matters (see
    /// ``RateLimitState/admit(now:options:)``).
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` as ``check(key:now:quantity:)`` does.
    @inlinable
    public mutating func admit(key: Key, now: Instant) throws(SluiceError) -> Duration? {
        let now = summary.monotonic(now)
        let (slot, restored) = try entry(key, hash: KeySlotPrefetcher.hash(key), now: now, fresh: RateLimitState())
        let refusal = table[slot.index].admit(now: now, options: options)
        if restored, refusal != nil { summary.countRefusal() }
        return refusal
    }

    /// `key`'s state as the next check would find it, without changing anything: the table's,
    /// else the one the summary would restore, else a fresh one.
    public func peekState(of key: Key, now: Instant) -> RateLimitState {
        if let index = table.index(of: key) { return table[index] }
        return summary.restoredState(of: key, now: now) ?? RateLimitState()
    }

    /// Gives back `quantity` events a check of `key` allowed and that were then not used (see
    /// ``RateLimitState/refund(quantity:now:options:)``).
    @inlinable
    public mutating func refund(key: Key, quantity: Int, now: Instant) {
        let now = summary.monotonic(now)
        guard let index = table.index(of: key) else { return }
        table[index].refund(quantity: quantity, now: now, options: options)
    }

}

/// A policy table with a summary of the live keys it evicts (``TimedTable``, ``RateLimitTable``):
/// the upkeep and counters they share.
public protocol SummarizedTable {
    /// The table's keys.
    associatedtype Key: Hashable
    /// The per-key state.
    associatedtype State: KeyedState
    /// The per-key states.
    var table: KeyTable<Key, State> { get set }
    /// What the table remembers of the live keys it evicted.
    var summary: EvictionSummary { get set }
}

extension SummarizedTable {
    /// Drops idle keys (see ``KeyTable/sweep(now:maxEntries:)``) and purges the summary.
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        let now = summary.monotonic(now)
        summary.purge(now: now)
        return table.sweep(now: now, maxEntries: maxEntries)
    }

    /// Drops idle keys, keeping up with arrivals (see ``KeyTable/sweepKeepingUp(now:minimumEntries:)``),
    /// and purges the summary.
    @inlinable
    @discardableResult
    public mutating func sweepKeepingUp(now: Instant, minimumEntries: Int) -> Int {
        let now = summary.monotonic(now)
        summary.purge(now: now)
        return table.sweepKeepingUp(now: now, minimumEntries: minimumEntries)
    }

    /// The table's counters with its summary's.
    public var stats: KeyTableStats { summary.adding(to: table.stats) }
}

extension SummarizedTable where State: RestrictingState {
    /// The entry of `key`, made with `fresh` when absent, or with the state the summary restores
    /// for it (then `restored`); the live keys evicted for room are remembered.
    ///
    /// The summary is asked before anything is evicted for the key, so a key it refuses leaves
    /// the table as it was (no entry evicted, no held event lost).
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` as the table's lookup does, and for a key the
    ///   summary can neither clear nor restrict (only an overflow marker answers for it, see
    ///   ``EvictionSummary/Recall/undecidable(until:)``). Such a key gets no entry, so that it
    ///   asks the summary again next time.
    @inlinable
    mutating func entry(
        _ key: Key, hash: UInt32, now: Instant, fresh: @autoclosure () -> State
    ) throws(SluiceError) -> (slot: KeyTable<Key, State>.Insertion, restored: Bool) {
        let position: Int
        switch table.find(key, hash: hash, now: now, resettingIdleTo: fresh()) {
        case .found(let index):
            return (KeyTable<Key, State>.Insertion(index: index, isNew: false, evicted: []), false)
        case .absent(let at):
            position = at
        }
        let state: State
        let restored: Bool
        switch summary.recall(key, now: now) as EvictionSummary.Recall<State> {
        case .nothing:
            (state, restored) = (fresh(), false)
        case .restricted(let remembered):
            (state, restored) = (remembered, true)
        case .undecidable(let until):
            throw .summaryOverflowed(until: until)
        }
        let slot = try table.insertNew(key, hash: hash, position: position, value: state, now: now)
        if !slot.evicted.isEmpty { summary.remember(slot.evicted, now: now) }
        return (slot, restored)
    }
}

/// A per-key counter that a plugin keeps in its shard (how many taps of a key ran, …). A count
/// is never idle: a table of them evicts a key not used lately when its budget is spent, and
/// that key counts from zero again.
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
