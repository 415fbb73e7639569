#if Hummingbird
import Sluice
import SluiceCore
import Synchronization

/// A throttle decided in place: a `ThrottleTable` under a mutex, read by whichever thread
/// handles the request.
final class InPlaceThrottle: Sendable {
    private let table: Mutex<ThrottleTable<String>>
    private let window: Duration
    private let clock: InPlaceClock
    private let tokens = Atomic<UInt64>(0)
    private let metrics: DecisionMetrics

    init(name: String, options: ThrottleOptions, budget: MemoryBudget, clock: InPlaceClock) throws(SluiceError) {
        table = Mutex(try ThrottleTable(options: options, budget: budget))
        window = options.interval
        self.clock = clock
        metrics = DecisionMetrics(name: name, refusal: "throttled")
    }

    /// Decides about a request for `key`: `.ran` (it may run), `.throttled` or `.busy` (the
    /// key does not fit the budget).
    func decide(_ key: String) -> GateOutcome<Void> {
        let now = clock.now
        let number = tokens.wrappingAdd(1, ordering: .relaxed).newValue
        let decision = table.withLock { table -> Decision? in
            // Idle keys go a few at a time, as the gate's sweeps would take them.
            if number % InPlaceClock.sweepEvery == 0 { _ = table.sweep(now: now, maxEntries: InPlaceClock.sweepBatch) }
            do {
                return try table.event(EventToken(number), key: key, now: now).decision
            } catch {
                return nil
            }
        }
        let outcome: GateOutcome<Void>
        switch decision {
        case .run: outcome = .ran((), .executed)
        case .drop(let retryAfter): outcome = .throttled(retryAfter: retryAfter)
        // A leading-only throttle holds nothing; were it to, the request is refused for a window.
        case .hold: outcome = .throttled(retryAfter: window)
        case nil: outcome = .busy
        }
        metrics.count(outcome)
        return outcome
    }
}
#endif
