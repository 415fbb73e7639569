/// The outcomes a plugin lane decided since it last reported them to
/// `sluice_decisions_total`, one count per kind of outcome (in ``OutcomeMetrics/index(of:)``'s
/// order). Kept under the shard's lock, so that counting a decision is an add: a call into the
/// metrics backend for every request (the counter's handler, through its existential, with the
/// counter and handler retained and released around it) cost about 17 ns of a throttled request's
/// 150. ``OutcomeMetrics/report(_:)`` adds them to the counters: on each sweep of the shard, on
/// ``Gate/statistics()`` and when the gate drains.
@usableFromInline
struct DecisionCounts {
    @usableFromInline var counts: [Int]

    init() {
        counts = Array(repeating: 0, count: OutcomeMetrics.labels.count)
    }

    /// Counts one outcome.
    @inlinable
    mutating func count<Output>(_ outcome: GateOutcome<Output>) {
        counts[OutcomeMetrics.index(of: outcome)] &+= 1
    }
}
