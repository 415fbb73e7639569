#if Hummingbird
import Sluice
import SluiceCore
import Synchronization

/// A GCRA limit decided in place: a `RateLimitTable` under a mutex, read by whichever thread
/// handles the request.
final class InPlaceRateLimit: Sendable {
    private let table: Mutex<RateLimitTable<String>>
    private let clock: InPlaceClock
    private let decisions = Atomic<UInt64>(0)
    private let metrics: DecisionMetrics

    init(name: String, options: RateLimitOptions, budget: MemoryBudget, clock: InPlaceClock) throws(SluiceError) {
        table = Mutex(try RateLimitTable(options: options, budget: budget))
        self.clock = clock
        metrics = DecisionMetrics(name: name, refusal: "limited")
    }

    /// Decides about a request for `key`: `.ran` with the limiter's fields, `.limited`, or
    /// `.busy` (the key does not fit the budget).
    func decide(_ key: String) -> GateOutcome<Void> {
        let now = clock.now
        let number = decisions.wrappingAdd(1, ordering: .relaxed).newValue
        let decision = table.withLock { table -> RateLimitDecision? in
            // Idle keys go a few at a time, as the gate's sweeps would take them.
            if number % InPlaceClock.sweepEvery == 0 { _ = table.sweep(now: now, maxEntries: InPlaceClock.sweepBatch) }
            do {
                return try table.check(key: key, now: now)
            } catch {
                return nil
            }
        }
        let outcome: GateOutcome<Void>
        if let decision {
            outcome = decision.allowed ? .ran((), RunInfo(source: .executed, rateLimit: decision)) : .limited(decision)
        } else {
            outcome = .busy
        }
        metrics.count(outcome)
        return outcome
    }
}
#endif
