import SluiceCore

/// Which policy governs a plugin's requests, per key.
public enum GatePolicy: Sendable, Hashable {
    /// At most one run per window per key; other requests are ``GateOutcome/throttled(retryAfter:)``,
    /// or held for the trailing run when the options say so (a newer held request makes the
    /// older one ``GateOutcome/superseded``).
    case throttle(ThrottleOptions)
    /// Runs a key's latest request once the key has been quiet; a replaced request is
    /// ``GateOutcome/superseded``. With `cancelInFlight` (switch-latest), a newer request also
    /// cancels the key's running effect with the same effect ID, which ends
    /// ``GateOutcome/cancelled(_:)`` with ``CancellationReason/replaced``.
    case debounce(DebounceOptions, cancelInFlight: Bool)
    /// GCRA per key: a request runs when its cost fits, else it is
    /// ``GateOutcome/limited(_:)``. Either way the outcome carries the limiter's fields (limit,
    /// remaining, retry-after, reset-after). A refused request spends nothing.
    case rateLimit(RateLimitOptions)
    /// Concurrent requests for the same record (``GatePlugin/identity(for:)``) share one
    /// execution: the first leads it, the others join and get its result. A waiter may leave; the
    /// execution is cancelled only once no waiter remains. Nothing is kept after it completes.
    case singleFlight
    /// Runs once per record: a duplicate joins the running execution (or is refused as a
    /// ``GateOutcome/conflict``), or gets the stored result as a replay; another fingerprint is a
    /// ``GateOutcome/mismatch``. The execution lives in the key's scope: its callers may leave,
    /// it runs on and its result is stored.
    case idempotent(IdempotencyOptions)
    /// Runs every request; a newer request cancels the key's running effect with the same effect
    /// ID first (TCA's `cancelInFlight: true`).
    case switchLatest
    /// Runs every request.
    case unrestricted
}
