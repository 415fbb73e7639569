/// How a ``Gate`` sweeps idle keys and shuts down.
public struct GateOptions: Sendable, Hashable {
    /// How long ``Gate/shutdown(gracePeriod:)`` waits for running and held effects to finish
    /// before it cancels them, by default.
    public var shutdownGracePeriod: Duration
    /// How often each shard sweeps its tables for keys whose state no longer matters.
    public var sweepInterval: Duration
    /// How many entries of each table one sweep examines at least; a sweep examines twice as
    /// many as the keys that arrived since the last one when that is more, so it keeps up with
    /// any arrival rate.
    public var sweepBatch: Int
    /// How long ``Gate/shutdown(gracePeriod:)`` waits, once the grace period is over, for what
    /// must still end: effects past their commit point, and the results and record releases on
    /// their way to a shared store (each also bounded by the store's own call timeout). What
    /// is still pending then is counted in one log line, its records left to their leases.
    public var shutdownSettleTimeout: Duration

    /// The defaults: a 5 s grace period then up to 5 s to settle, a sweep of 256 entries per
    /// table every 50 ms.
    ///
    /// A sweep runs on the loop between requests. A table under three quarters of its capacity
    /// is swept at that minimum (its idle keys cost memory its budget allows, and a key that
    /// comes back reuses its entry); a fuller one keeps up with its arrivals, twice the keys
    /// that arrived since the last sweep, so the interval sets the pause it makes: at 30,000
    /// new keys a second, a sweep every 250 ms drops some 7,500 keys at once (a few
    /// milliseconds that the requests arriving meanwhile wait out, seen in the p99), one every
    /// 50 ms about 1,500.
    public init(
        shutdownGracePeriod: Duration = .seconds(5),
        sweepInterval: Duration = .milliseconds(50),
        sweepBatch: Int = 256,
        shutdownSettleTimeout: Duration = .seconds(5)
    ) {
        self.shutdownGracePeriod = shutdownGracePeriod
        self.sweepInterval = sweepInterval
        self.sweepBatch = sweepBatch
        self.shutdownSettleTimeout = shutdownSettleTimeout
    }

    /// Checks every option.
    public func validate() throws(SluiceError) {
        guard shutdownGracePeriod >= .zero else {
            throw SluiceError(code: .invalidOption, message: "the shutdown grace period cannot be negative", value: "\(shutdownGracePeriod)")
        }
        guard sweepInterval > .zero else {
            throw SluiceError(code: .invalidOption, message: "the sweep interval must be positive", value: "\(sweepInterval)")
        }
        guard shutdownSettleTimeout >= .zero else {
            throw SluiceError(code: .invalidOption, message: "the shutdown settle timeout cannot be negative", value: "\(shutdownSettleTimeout)")
        }
        guard sweepBatch >= 1 else {
            throw SluiceError(code: .invalidOption, message: "a sweep examines at least one entry", value: "\(sweepBatch)")
        }
    }
}
