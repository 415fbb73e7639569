#if Hummingbird
import CoreMetrics
import Sluice

/// The swift-metrics counters of a rule decided in place, named as the gate names its own:
/// `sluice_decisions_total{plugin, outcome}`.
final class DecisionMetrics: Sendable {
    private let executed: Counter
    private let refused: Counter
    private let busy: Counter

    /// The counters of rule `name`, whose refusals are counted as `refusal` (`throttled`,
    /// `limited`).
    init(name: String, refusal: String) {
        executed = Counter(label: "sluice_decisions_total", dimensions: [("plugin", name), ("outcome", "executed")])
        refused = Counter(label: "sluice_decisions_total", dimensions: [("plugin", name), ("outcome", refusal)])
        busy = Counter(label: "sluice_decisions_total", dimensions: [("plugin", name), ("outcome", "busy")])
    }

    /// Counts `outcome`.
    func count(_ outcome: GateOutcome<Void>) {
        switch outcome {
        case .ran: executed.increment()
        case .busy: busy.increment()
        default: refused.increment()
        }
    }
}
#endif
