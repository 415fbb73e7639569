/// What a rate limiter decided, with the fields redis-cell's `CL.THROTTLE` returns.
public struct RateLimitDecision: Hashable, Sendable {
    /// Whether the event may run (redis-cell's `limited` is `!allowed`).
    public var allowed: Bool
    /// The most events allowed back to back: `burst + 1`.
    public var limit: Int
    /// How many more events of quantity 1 would be allowed right now.
    public var remaining: Int
    /// When limited, how long until this request would be allowed; `nil` when allowed, or when the
    /// quantity exceeds `limit` and it never would be (redis-cell answers -1 in both cases).
    public var retryAfter: Duration?
    /// How long until the key is back to its full `limit`.
    public var resetAfter: Duration

    /// Creates a decision.
    @inlinable
    public init(allowed: Bool, limit: Int, remaining: Int, retryAfter: Duration?, resetAfter: Duration) {
        self.allowed = allowed
        self.limit = limit
        self.remaining = remaining
        self.retryAfter = retryAfter
        self.resetAfter = resetAfter
    }
}

/// The per-key state of a GCRA rate limiter: one theoretical arrival time (8 bytes).
///
/// Semantics follow redis-cell (`CL.THROTTLE key burst count period quantity`): with emission
/// interval `E = period / count` and tolerance `τ = E × (burst + 1)`, a request of quantity `q` at `t`
/// computes `tat' = max(tat, t) + q·E` and is allowed iff `tat' − τ ≤ t`; only an allowed request
/// stores `tat'`. One deliberate difference: redis-cell compares in whole seconds
/// (`diff.num_seconds() < 0`), so it lets through requests up to a second early; this compares in
/// nanoseconds. A quantity of 0 peeks without consuming.
public struct RateLimitState: Hashable, Sendable {
    /// Theoretical arrival time in nanoseconds, or `Int64.min` for a fresh key.
    @usableFromInline var tat: Int64

    /// A key with its full burst available.
    @inlinable
    public init() {
        tat = Instant.noneNanos
    }

    /// Decides whether `quantity` events at `now` are allowed, consuming them if so.
    @inlinable
    public mutating func check(now: Instant, options: RateLimitOptions, quantity: Int = 1) -> RateLimitDecision {
        let t = now.nanoseconds
        let interval = options.emissionInterval
        let tolerance = options.tolerance
        let current = tat == Instant.noneNanos ? t : tat
        let increment = interval.multipliedReportingOverflow(by: Int64(Swift.max(0, quantity)))
        let inc = increment.overflow ? Int64.max : increment.partialValue
        let newTat = Swift.max(current, t).saturatingAdd(inc)
        let allowAt = newTat.saturatingSubtract(tolerance)
        let allowed = allowAt <= t
        let ttl: Int64
        var retryAfter: Duration? = nil
        if allowed {
            tat = newTat
            ttl = newTat &- t
        } else {
            if inc <= tolerance { retryAfter = .nanoseconds(allowAt &- t) }
            ttl = Swift.max(0, current &- t)
        }
        let next = tolerance &- ttl
        let remaining = next > -interval ? Int(next / interval) : 0
        return RateLimitDecision(
            allowed: allowed,
            limit: options.burst + 1,
            remaining: remaining,
            retryAfter: retryAfter,
            resetAfter: .nanoseconds(ttl)
        )
    }
}

extension RateLimitState {
    /// ``check(now:options:quantity:)`` for one event when only the verdict matters: consumes
    /// the event and returns `nil` when it is allowed, else how long until it would be (always
    /// finite for one event). Skips the `remaining` and `resetAfter` arithmetic of a full
    /// decision; the state changes exactly as `check` would change it.
    @inlinable
    public mutating func admit(now: Instant, options: RateLimitOptions) -> Duration? {
        let t = now.nanoseconds
        let current = tat == Instant.noneNanos ? t : tat
        let newTat = Swift.max(current, t).saturatingAdd(options.emissionInterval)
        let allowAt = newTat.saturatingSubtract(options.tolerance)
        if allowAt <= t {
            tat = newTat
            return nil
        }
        return .nanoseconds(allowAt &- t)
    }
}

extension RateLimitState {
    /// Gives back `quantity` events that ``check(now:options:quantity:)`` allowed and that were
    /// then not used (the runtime refused the work for another reason). GCRA's whole state is
    /// one arrival time, so this undoes the check exactly: the key is as it was before it (or,
    /// if it was idle then, idle again).
    @inlinable
    public mutating func refund(quantity: Int, now: Instant, options: RateLimitOptions) {
        guard tat != Instant.noneNanos else { return }
        let spent = options.emissionInterval.multipliedReportingOverflow(by: Int64(Swift.max(0, quantity)))
        tat = tat.saturatingSubtract(spent.overflow ? Int64.max : spent.partialValue)
        if tat <= now.nanoseconds { tat = Instant.noneNanos }
    }
}

extension RateLimitState: KeyedState {
    /// True once the key has its full burst again (equivalent to a fresh key).
    @inlinable
    public func isIdle(at now: Instant) -> Bool {
        tat <= now.nanoseconds
    }
}

extension RateLimitState: RestrictingState {
    /// The theoretical arrival time, while it is ahead of `now`: a state with a later one
    /// allows no more than this one.
    @inlinable
    public func restriction(at now: Instant) -> Instant? {
        tat > now.nanoseconds ? Instant(nanoseconds: tat) : nil
    }

    /// A state whose theoretical arrival time is `until`.
    @inlinable
    public init(restrictedUntil until: Instant) {
        tat = until.nanoseconds
    }
}

/// A GCRA rate limiter for one key: ``RateLimitOptions`` plus a ``RateLimitState``.
public struct RateLimit: Hashable, Sendable {
    /// The options every decision uses.
    public let options: RateLimitOptions
    /// The current state.
    public var state = RateLimitState()

    /// A limiter with its full burst available.
    public init(options: RateLimitOptions) {
        self.options = options
    }

    /// Decides whether `quantity` events at `now` are allowed, consuming them if so.
    @inlinable
    public mutating func check(now: Instant, quantity: Int = 1) -> RateLimitDecision {
        state.check(now: now, options: options, quantity: quantity)
    }
}
