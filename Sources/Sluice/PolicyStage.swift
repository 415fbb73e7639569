import SluiceCore

/// A plugin's policy in one shard, as one stage: the policy family and the `SluiceCore` state
/// machine it decides with. A stage's state is a pure state machine. It takes an event and
/// `now`, and returns a decision plus what to carry out: a run, a hold with its timer, a request
/// superseded, held requests evicted, a refund. The lane is the driver that carries them out.
///
/// A family that keeps no state per key (single-flight, switch-latest, unrestricted) charges the
/// side state of its executions and waiters to a budget of their own. A family with a table
/// charges it to the table, so that idle keys are evicted to make room.
@usableFromInline
enum PolicyStage<Output: Sendable> {
    /// Leading and trailing throttling.
    case throttle(StageState<ThrottleTable<String>>)
    /// Debouncing; `switchLatest` also cancels the key's running effect when a newer one starts.
    case debounce(StageState<DebounceTable<String>>, switchLatest: Bool)
    /// GCRA per key.
    case rateLimit(StageState<RateLimitTable<String>>)
    /// Idempotency records, with the quota of new records per key when the options set one.
    case idempotent(
        StageState<IdempotencyTable<String, String, Result<Output, any Error>>>, recordQuota: StageState<RateLimitTable<String>>?)
    /// One execution per record at a time, its duplicates joining it.
    case singleFlight(StageState<SideStateBudget>)
    /// A newer request cancels the key's running effect.
    case switchLatest(StageState<SideStateBudget>)
    /// Every request runs.
    case unrestricted(StageState<SideStateBudget>)

    /// The stage of `policy` (a shared store's local fallback policy), its state within `budget`.
    init(_ policy: GatePolicy, budget: MemoryBudget) throws(SluiceError) {
        switch policy {
        case .throttle(let options):
            self = .throttle(StageState(try ThrottleTable(options: options, budget: budget)))
        case .debounce(let options, let switchLatest):
            self = .debounce(StageState(try DebounceTable(options: options, budget: budget)), switchLatest: switchLatest)
        case .rateLimit(let options):
            self = .rateLimit(StageState(try RateLimitTable(options: options, budget: budget)))
        case .idempotent(let options):
            let records = try IdempotencyTable<String, String, Result<Output, any Error>>(options: options, budget: budget)
            var quota: StageState<RateLimitTable<String>>?
            if let perKey = options.recordsPerKey {
                // A state per key that opened a record lately: 16 bytes and its key, in a table
                // of its own an eighth the size of the records' budget.
                quota = StageState(
                    try RateLimitTable(
                        options: RateLimitOptions(count: perKey, per: options.retention, burst: perKey - 1),
                        budget: budget.eighth))
            }
            self = .idempotent(StageState(records), recordQuota: quota)
        case .singleFlight:
            self = .singleFlight(StageState(SideStateBudget(budget)))
        case .switchLatest:
            self = .switchLatest(StageState(SideStateBudget(budget)))
        case .unrestricted:
            self = .unrestricted(StageState(SideStateBudget(budget)))
        }
    }

    /// The prefetcher of the table indexed by the request's key: the throttle, debounce and
    /// rate-limit tables; `nil` for the other families.
    var slotPrefetcher: KeySlotPrefetcher? {
        switch self {
        case .throttle(let state): state.value.table.slotPrefetcher
        case .debounce(let state, _): state.value.table.slotPrefetcher
        case .rateLimit(let state): state.value.table.slotPrefetcher
        case .idempotent, .singleFlight, .switchLatest, .unrestricted: nil
        }
    }

    /// Whether a newer execution of a key cancels the key's running one.
    var cancelsInFlight: Bool {
        switch self {
        case .debounce(_, let switchLatest): switchLatest
        case .switchLatest: true
        default: false
        }
    }

    /// Whether the stage charges side state to a budget of its own rather than to a table.
    var hasSideBudget: Bool {
        switch self {
        case .singleFlight, .switchLatest, .unrestricted: true
        default: false
        }
    }

    /// Delivers the timer a timed stage asked for `key` at `now`; `.none` for a stage without
    /// timers.
    @inlinable
    func fire(key: String, now: Instant) -> FireDecision {
        switch self {
        case .throttle(let state): state.value.fire(key: key, now: now)
        case .debounce(let state, _): state.value.fire(key: key, now: now)
        case .rateLimit, .idempotent, .singleFlight, .switchLatest, .unrestricted: .none
        }
    }

    /// Charges `bytes` of side state (an execution or a waiter), evicting idle keys to make room.
    /// `false` when the budget cannot take them.
    @inlinable
    func charge(_ bytes: Int, now: Instant) -> Bool {
        switch self {
        case .throttle(let state): state.value.table.charge(bytes: bytes, now: now)
        case .debounce(let state, _): state.value.table.charge(bytes: bytes, now: now)
        case .rateLimit(let state): state.value.table.charge(bytes: bytes, now: now)
        case .idempotent(let state, _): state.value.table.charge(bytes: bytes, now: now)
        case .singleFlight(let state), .switchLatest(let state), .unrestricted(let state): state.value.charge(bytes: bytes)
        }
    }

    /// Gives back `bytes` charged earlier.
    @inlinable
    func release(_ bytes: Int) {
        switch self {
        case .throttle(let state): state.value.table.release(bytes: bytes)
        case .debounce(let state, _): state.value.table.release(bytes: bytes)
        case .rateLimit(let state): state.value.table.release(bytes: bytes)
        case .idempotent(let state, _): state.value.table.release(bytes: bytes)
        case .singleFlight(let state), .switchLatest(let state), .unrestricted(let state): state.value.release(bytes: bytes)
        }
    }

    /// Drops idle keys, keeping up with the table's growth.
    func sweep(now: Instant, maxEntries: Int) {
        switch self {
        case .throttle(let state): state.value.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        case .debounce(let state, _): state.value.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        case .rateLimit(let state): state.value.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        case .idempotent(let state, let quota):
            state.value.table.sweepKeepingUp(now: now, minimumEntries: maxEntries)
            quota?.value.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        case .singleFlight, .switchLatest, .unrestricted: break
        }
    }

    /// The keys (or records) the stage's table holds.
    @usableFromInline var keyCount: Int {
        switch self {
        case .throttle(let state): state.value.table.count
        case .debounce(let state, _): state.value.table.count
        case .rateLimit(let state): state.value.table.count
        case .idempotent(let state, _): state.value.table.count
        case .singleFlight, .switchLatest, .unrestricted: 0
        }
    }

    /// The statistics of the stage's table; `nil` for a stage without one.
    @usableFromInline var tableStats: KeyTableStats? {
        switch self {
        case .throttle(let state): state.value.stats
        case .debounce(let state, _): state.value.stats
        case .rateLimit(let state): state.value.stats
        case .idempotent(let state, _): state.value.table.stats
        case .singleFlight, .switchLatest, .unrestricted: nil
        }
    }
}

/// The state a stage decides with, held by reference so that the lane changes it in place (a
/// table inside an enum's payload would be copied on every change). Used only under the lock of
/// the shard that holds the lane.
@usableFromInline
final class StageState<Value> {
    @usableFromInline @exclusivity(unchecked) var value: Value

    @usableFromInline
    init(_ value: Value) {
        self.value = value
    }
}

extension MemoryBudget {
    /// An eighth of this budget, at least 64 entries or 64 KiB: the size of a side table (a
    /// plugin's quota of records per key, each stage of its limits).
    var eighth: MemoryBudget {
        MemoryBudget(entries: entries.map { max(64, $0 / 8) }, bytes: bytes.map { max(64 << 10, $0 / 8) })
    }
}
