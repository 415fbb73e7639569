import Sluice
import Synchronization

/// A stand-in payment processor: waits `latency` (cancellable), then passes the commit guard
/// (``EffectContext/commit()``) and charges. Amounts at or above `declineAtOrAbove` are
/// declined with `amount-limit`.
public final class SimulatedProcessor: PaymentProcessor {
    /// How long a charge takes before it commits.
    public let latency: Duration
    /// The smallest amount declined.
    public let declineAtOrAbove: Int
    /// Charges committed (`payments` in `STATS`).
    public let payments = PluginCounter("payments")
    /// Declines committed (`declines` in `STATS`).
    public let declines = PluginCounter("declines")
    private let sequence = Atomic<UInt64>(0)
    private let prefix: String

    /// A processor with the given latency and decline threshold.
    public init(latency: Duration = .milliseconds(20), declineAtOrAbove: Int = 1_000_000) {
        self.latency = latency
        self.declineAtOrAbove = declineAtOrAbove
        // Charge ids stay unique across restarts of the process, too.
        self.prefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }

    public func charge(_ payment: PaymentPlugin.Payment, context: EffectContext) async throws -> PaymentOutcome {
        try await context.sleep(for: latency)
        // The commit point: past it a drain lets the charge finish; before it, a cancellation
        // (or a lease no longer safely held) stops it with nothing charged. Nothing below
        // suspends, so the charge lands whole.
        try context.commit()
        if payment.amount >= declineAtOrAbove {
            declines.increment()
            return .declined("amount-limit")
        }
        payments.increment()
        let number = sequence.wrappingAdd(1, ordering: .relaxed).newValue
        return .charged("ch_\(prefix)_\(number)")
    }

    public var counters: [PluginCounter] { [payments, declines] }
}
