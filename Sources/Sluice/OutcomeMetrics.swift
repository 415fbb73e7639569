import CoreMetrics

/// The swift-metrics instruments of one plugin: `sluice_decisions_total{plugin, outcome}`, one
/// counter per kind of outcome, and `sluice_effect_duration_seconds{plugin}`, how long its
/// effects ran.
///
/// The instruments are made once per plugin lane. The lane counts its outcomes in a
/// ``DecisionCounts`` under the shard's lock and reports them here (``report(_:)``) on each sweep,
/// on ``Gate/statistics()`` and when the gate drains: the counters trail the decisions by at most
/// one sweep interval (``GateOptions/sweepInterval``, 50 ms by default).
@usableFromInline
final class OutcomeMetrics: Sendable {
    /// The outcome label of each kind, in the order of ``index(of:)``.
    static let labels = [
        "executed", "replayed", "joined", "failed", "throttled", "limited", "superseded", "cancelled", "mismatch",
        "conflict", "busy", "shutting_down", "unavailable",
    ]

    @usableFromInline let counters: [Counter]
    /// How long effects ran; `nil` when the metrics factory in effect when the lane was made
    /// keeps nothing (swift-metrics' `NOOPMetricsHandler`, before any bootstrap): a timer's
    /// handler is chosen when it is made, so what it would record is dropped anyway, and an
    /// effect then costs no clock reads around it.
    @usableFromInline let effectDuration: Timer?

    init(plugin: String) {
        let factory = MetricsSystem.factory
        counters = Self.labels.map {
            Counter(label: "sluice_decisions_total", dimensions: [("plugin", plugin), ("outcome", $0)], factory: factory)
        }
        effectDuration =
            factory is NOOPMetricsHandler
            ? nil
            : Timer(
                label: "sluice_effect_duration_seconds", dimensions: [("plugin", plugin)], preferredDisplayUnit: .seconds,
                factory: factory)
    }

    /// Adds what `counts` counted to the counters, and zeroes it.
    func report(_ counts: inout DecisionCounts) {
        for (index, count) in counts.counts.enumerated() where count > 0 {
            counters[index].increment(by: count)
            counts.counts[index] = 0
        }
    }

    @inlinable
    static func index<Output>(of outcome: GateOutcome<Output>) -> Int {
        switch outcome {
        case .failed:
            return 3
        case .ran(_, let info):
            switch info.source {
            case .executed: return 0
            case .replayed: return 1
            case .joined: return 2
            }
        case .throttled: return 4
        case .limited: return 5
        case .superseded: return 6
        case .cancelled: return 7
        case .mismatch: return 8
        case .conflict: return 9
        case .busy: return 10
        case .shuttingDown: return 11
        case .unavailable: return 12
        }
    }
}
