import SluiceCore

/// Counters over every shard of a ``Gate``.
public struct GateStatistics: Sendable, Hashable {
    /// Keys held in the plugins' policy tables.
    public var keys = 0
    /// Executions held or running.
    public var executions = 0
    /// Requests waiting for a result.
    public var waiters = 0
    /// Scopes holding requests (the roots not counted).
    public var scopes = 0
    /// Executions cancelled so far.
    public var cancelled: Int
    /// Each plugin's policy table counters, by plugin name.
    public var tables: [String: KeyTableStats] = [:]
    /// The keys each plugin holds, by plugin name.
    public var keysByPlugin: [String: Int] = [:]
    /// What each stage in shadow mode would have refused (`ChainStage.shadow`), by plugin
    /// name and stage name (also exported as `sluice_shadow_refusals_total{plugin, stage}`).
    public var shadowRefusals: [String: [String: Int]] = [:]

    /// Live keys evicted from every policy table to make room for new keys. Idle keys (whose
    /// state is no different from a fresh key's) always go first, so each of these may have
    /// changed a decision: a throttled key evicted can pass again at once.
    public var evicted: Int { tables.values.reduce(0) { $0 + $1.evicted } }
}
