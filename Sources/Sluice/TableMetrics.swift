import CoreMetrics
import SluiceCore

/// What a plugin's policy table reports to swift-metrics, from its counters, at each sweep:
///
/// - `sluice_evictions_total{plugin}`: live keys evicted to make room (each may have changed a
///   decision when the table forgets them);
/// - `sluice_summary_refusals_total{plugin}`: decisions refused for a key the table no longer
///   held, on the word of its summary of evicted keys (a table that remembers them);
/// - `sluice_summary_fill{plugin}`: how full that summary is, from 0 to 1;
/// - `sluice_summary_overflows_total{plugin}`: restrictions the summary could not store (each
///   marks a bucket that refuses every key mapping to it until the restriction ends).
struct TableMetrics {
    let evictions: Counter
    let summaryRefusals: Counter
    let summaryFill: Gauge
    let summaryOverflows: Counter
    /// The counts already added to the counters.
    private var reported = KeyTableStats()

    init(plugin: String) {
        evictions = Counter(label: "sluice_evictions_total", dimensions: [("plugin", plugin)])
        summaryRefusals = Counter(label: "sluice_summary_refusals_total", dimensions: [("plugin", plugin)])
        summaryFill = Gauge(label: "sluice_summary_fill", dimensions: [("plugin", plugin)])
        summaryOverflows = Counter(label: "sluice_summary_overflows_total", dimensions: [("plugin", plugin)])
    }

    /// Adds what `stats` counted since the last report.
    mutating func report(_ stats: KeyTableStats) {
        if stats.evicted > reported.evicted { evictions.increment(by: stats.evicted - reported.evicted) }
        if stats.summaryRefusals > reported.summaryRefusals {
            summaryRefusals.increment(by: stats.summaryRefusals - reported.summaryRefusals)
        }
        if stats.summaryFill != reported.summaryFill { summaryFill.record(stats.summaryFill) }
        if stats.summaryOverflows > reported.summaryOverflows {
            summaryOverflows.increment(by: stats.summaryOverflows - reported.summaryOverflows)
        }
        reported = stats
    }
}
