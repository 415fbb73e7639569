/// Counters the gate keeps itself (plugins keep theirs).
final class GateCounters: Sendable {
    /// Executions cancelled: by `cancel(id:…)`, by switch-latest, by a closing scope, by a
    /// shutdown.
    let cancelled = PluginCounter("cancelled")
}
