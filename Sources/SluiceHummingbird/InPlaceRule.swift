#if Hummingbird
import Sluice
import SluiceCore
import SluiceLibevent
import Synchronization

/// A rule decided in place: its SluiceCore table under a mutex, read by whichever thread handles
/// the request. Idle keys go a few at a time, every `InPlaceClock.sweepEvery` decisions, as the
/// gate's sweeps would take them, and the decisions are counted as the gate counts its own.
final class InPlaceRule<Table>: Sendable {
    /// Decides about `key` at `now` in the table (`number` numbers the decision); throws when
    /// the key does not fit the table's budget.
    typealias Decide = @Sendable (_ table: inout Table, _ key: String, _ now: Instant, _ number: UInt64) throws -> GateOutcome<Void>
    /// Drops some idle keys at `now`.
    typealias Sweep = @Sendable (_ table: inout Table, _ now: Instant) -> Void

    private let table: Mutex<Table>
    private let clock: InPlaceClock
    private let decisions = Atomic<UInt64>(0)
    private let metrics: DecisionMetrics
    private let sweep: Sweep
    private let decideInTable: Decide

    /// A rule named `name` deciding in `table`; its refusals are counted as `refusal`
    /// (`throttled`, `limited`).
    init(name: String, refusal: String, table: sending Table, clock: InPlaceClock, sweep: @escaping Sweep, decide: @escaping Decide) {
        self.table = Mutex(table)
        self.clock = clock
        metrics = DecisionMetrics(name: name, refusal: refusal)
        self.sweep = sweep
        decideInTable = decide
    }

    /// Decides about a request for `key`: what the table decides, or `.busy` when the key does
    /// not fit the budget.
    func decide(_ key: String) -> GateOutcome<Void> {
        let now = clock.now
        let number = decisions.wrappingAdd(1, ordering: .relaxed).newValue
        let outcome = table.withSanitizedLock { table -> GateOutcome<Void> in
            if number % InPlaceClock.sweepEvery == 0 { sweep(&table, now) }
            return (try? decideInTable(&table, key, now, number)) ?? .busy
        }
        metrics.count(outcome)
        return outcome
    }
}

extension InPlaceRule where Table == RateLimitTable<String> {
    /// A GCRA limit decided in place: `.ran` with the limiter's fields, `.limited`, or `.busy`.
    static func rateLimit(name: String, options: RateLimitOptions, budget: MemoryBudget, clock: InPlaceClock) throws(SluiceError) -> InPlaceRule {
        InPlaceRule(
            name: name, refusal: "limited", table: try RateLimitTable(options: options, budget: budget), clock: clock,
            sweep: { table, now in _ = table.sweep(now: now, maxEntries: InPlaceClock.sweepBatch) },
            decide: { table, key, now, _ in
                let decision = try table.check(key: key, now: now)
                return decision.allowed ? .ran((), RunInfo(source: .executed, rateLimit: decision)) : .limited(LimitRefusal(stage: name, verdict: .rate(decision)))
            })
    }
}

extension InPlaceRule where Table == ThrottleTable<String> {
    /// A throttle decided in place: `.ran` (it may run), `.throttled`, or `.busy`.
    static func throttle(name: String, options: ThrottleOptions, budget: MemoryBudget, clock: InPlaceClock) throws(SluiceError) -> InPlaceRule {
        let window = options.interval
        return InPlaceRule(
            name: name, refusal: "throttled", table: try ThrottleTable(options: options, budget: budget), clock: clock,
            sweep: { table, now in _ = table.sweep(now: now, maxEntries: InPlaceClock.sweepBatch) },
            decide: { table, key, now, number in
                switch try table.event(EventToken(number), key: key, now: now).decision {
                case .run: .ran((), .executed)
                case .drop(let retryAfter): .throttled(retryAfter: retryAfter)
                // A leading-only throttle holds nothing; were it to, the request is refused for a window.
                case .hold: .throttled(retryAfter: window)
                }
            })
    }
}
#endif
