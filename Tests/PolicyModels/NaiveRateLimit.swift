import SluiceCore

/// A deliberately naive GCRA: it keeps every allowed request and decides from the sliding-window
/// form of the algorithm — a request of quantity q at t is allowed iff, for every earlier allowed
/// request time s (and s = t), E × (quantity allowed in [s, t] + q) ≤ (t − s) + τ.
///
/// The reference of the property tests and of the rate-limit fuzz target.
public struct NaiveRateLimit {
    public var emission: Int64
    public var tolerance: Int64
    public var burst: Int
    public var allowed: [(time: Int64, quantity: Int64)] = []

    public init(emission: Int64, tolerance: Int64, burst: Int) {
        self.emission = emission
        self.tolerance = tolerance
        self.burst = burst
    }

    /// The theoretical arrival time after the allowed history plus `extra`, or nil.
    public func arrival(adding extra: (time: Int64, quantity: Int64)?) -> Int64? {
        let history = allowed + (extra.map { [$0] } ?? [])
        var best: Int64? = nil
        var total: Int64 = 0
        for k in history.indices.reversed() {
            total += history[k].quantity
            best = Swift.max(best ?? .min, history[k].time + emission * total)
        }
        return best
    }

    /// The decision for `quantity` at `t` (nanoseconds); an allowed request joins the history.
    public mutating func check(t: Int64, quantity: Int) -> RateLimitDecision {
        let q = Int64(quantity)
        let before = arrival(adding: nil)
        let after = arrival(adding: (t, q)) ?? t
        let allowAt = after - tolerance
        let ok = allowAt <= t
        let ttl: Int64
        var retry: Duration? = nil
        if ok {
            allowed.append((t, q))
            ttl = after - t
        } else {
            if q * emission <= tolerance { retry = .nanoseconds(allowAt - t) }
            ttl = Swift.max(0, (before ?? t) - t)
        }
        let next = tolerance - ttl
        return RateLimitDecision(
            allowed: ok,
            limit: burst + 1,
            remaining: next > -emission ? Int(next / emission) : 0,
            retryAfter: retry,
            resetAfter: .nanoseconds(ttl)
        )
    }
}
