import Metrics
import Synchronization

/// A counter a plugin keeps (charges made, searches completed, …), readable at any time and
/// exported to swift-metrics as `sluice_<name>_total`. Fronts may report it (the line protocol's
/// `STATS` does).
public final class PluginCounter: Sendable {
    /// The counter's name, e.g. `payments`.
    public let name: String
    private let value = Atomic<Int>(0)
    private let metric: Counter

    /// A counter starting at 0.
    public init(_ name: String) {
        self.name = name
        self.metric = Counter(label: "sluice_\(name)_total")
    }

    /// Adds `amount`.
    public func increment(by amount: Int = 1) {
        value.add(amount, ordering: .relaxed)
        metric.increment(by: amount)
    }

    /// The current value.
    public var current: Int { value.load(ordering: .relaxed) }
}
