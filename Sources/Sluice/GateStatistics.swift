/// Counters the gate itself keeps (the plugins keep theirs).
final class GateStatistics: Sendable {
    /// Effects cancelled: by `CANCEL`, by switch-latest, or by a closing connection.
    let cancelled = PluginCounter("cancelled")
}
