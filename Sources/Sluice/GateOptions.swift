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

    /// The defaults: a 5 s grace period, a sweep of 256 entries per table every 250 ms.
    public init(
        shutdownGracePeriod: Duration = .seconds(5),
        sweepInterval: Duration = .milliseconds(250),
        sweepBatch: Int = 256
    ) {
        self.shutdownGracePeriod = shutdownGracePeriod
        self.sweepInterval = sweepInterval
        self.sweepBatch = sweepBatch
    }

    /// Checks every option.
    public func validate() throws(GateError) {
        guard shutdownGracePeriod >= .zero else {
            throw GateError(code: .invalidConfiguration, message: "the shutdown grace period cannot be negative", value: "\(shutdownGracePeriod)")
        }
        guard sweepInterval > .zero else {
            throw GateError(code: .invalidConfiguration, message: "the sweep interval must be positive", value: "\(sweepInterval)")
        }
        guard sweepBatch >= 1 else {
            throw GateError(code: .invalidConfiguration, message: "a sweep examines at least one entry", value: "\(sweepBatch)")
        }
    }
}
