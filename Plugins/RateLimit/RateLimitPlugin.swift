import Sluice

/// A GCRA rate limit per key (as redis-cell's `CL.THROTTLE`): `count` requests per `period`
/// sustained, `burst` more back to back; a request spends its cost when it fits and nothing when
/// it is refused.
///
/// Every outcome carries the limiter's fields: a request that fits ends `GateOutcome/ran(_:_:)`
/// with `RunInfo/rateLimit` set (limit, remaining, reset-after); one that does not is
/// `GateOutcome/limited(_:)` (with retry-after, or none when its cost exceeds the limit).
public struct RateLimitPlugin: GatePlugin {
    /// A rate-limited request: the key and how many units it spends.
    public struct Check: Sendable, Hashable {
        /// The key (a user, an API key, an address).
        public let key: String
        /// The units it spends, 1…`RateLimitOptions/limit`.
        public let cost: Int

        /// A request of `cost` units for `key`.
        public init(key: String, cost: Int = 1) {
            self.key = key
            self.cost = cost
        }
    }

    public let name = "limit"
    public let policy: GatePolicy
    /// The limiter's options.
    public let options: RateLimitOptions
    /// Requests that fit.
    public let allowed = PluginCounter("limit_allowed")

    /// A limit of `count` per `period` with `burst` more back to back. When its table is full of
    /// live keys it does what `whenFull` says: by default it remembers the keys it evicts, so a
    /// flood of new keys does not reset a limited key (see `WhenTableFull`).
    ///
    /// - Throws: `SluiceError` with code `invalidOption` (see `RateLimitOptions`).
    public init(count: Int, per period: Duration, burst: Int, whenFull: WhenTableFull = .remember) throws(SluiceError) {
        options = try RateLimitOptions(count: count, per: period, burst: burst, whenFull: whenFull)
        policy = .rateLimit(options)
    }

    public func key(for input: Check) -> String { input.key }

    public func cost(for input: Check) -> Int { input.cost }

    /// A request that fits has nothing more to do: its outcome carries the limiter's fields.
    public func run(_ input: Check, context: EffectContext) async throws {
        allowed.increment()
    }

    /// Nothing to wait for: the gate runs it in place, without a task.
    public func runImmediately(_ input: Check, context: EffectContext) throws -> Void? {
        allowed.increment()
        return ()
    }
}
