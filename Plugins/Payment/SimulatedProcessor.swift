import Sluice
import Synchronization

/// A stand-in payment processor that behaves as a good provider does: it keeps its charges by
/// record identity in a ``ChargeLedger`` and checks the caller's fence.
///
/// A charge waits `latency` (cancellable), passes the commit guard
/// (`EffectContext.commit()`), which hands it the payment's record and fence, then asks the
/// ledger: a new record is charged (`payments` counts it); a record charged before gets that
/// charge back (``PaymentOutcome/alreadyCharged(_:)``, answered as a replay; `returned` counts
/// it); a stale fence charges nothing (`stale` counts it) and throws `CommitRefusal` with code
/// `CommitRefusal.Code.staleFence`, so that the gate answers the caller with the record's
/// result once its current owner stores it. A ledger that does not answer throws
/// `CommitRefusal.Code.downstreamUnavailable`: the caller is told to retry, which the ledger
/// makes safe. Amounts at or above `declineAtOrAbove` are declined with `amount-limit`,
/// without a ledger entry (a decline changes nothing).
///
/// Without a ledger (`ledger: nil`) every call that passes the guard charges: nothing outside
/// the gate stops a second owner.
public final class SimulatedProcessor: PaymentProcessor {
    /// How long a charge takes before it commits.
    public let latency: Duration
    /// The smallest amount declined.
    public let declineAtOrAbove: Int
    /// The processor's book of charges, if it keeps one.
    public let ledger: (any ChargeLedger)?
    /// Charges made (`payments` in `STATS`): not those the ledger returned.
    public let payments = PluginCounter("payments")
    /// Declines committed (`declines` in `STATS`).
    public let declines = PluginCounter("declines")
    /// Charges the ledger returned because the record was charged before (`returned`).
    public let returned = PluginCounter("returned")
    /// Calls the ledger refused for a stale fence (`stale`).
    public let stale = PluginCounter("stale")
    private let sequence = Atomic<UInt64>(0)
    private let prefix: String
    private let beforeCall: (@Sendable (EffectRecord) async -> Void)?
    private let beforeCommit: (@Sendable () -> Void)?

    /// A processor with the given latency, decline threshold and ledger (one in this process's
    /// memory by default). For tests: `beforeCommit` runs once the latency has passed, right
    /// before the commit guard, with nothing in between (a process stopped there wakes straight
    /// into the guard); `beforeCall` runs between the commit guard and the ledger call (a pause
    /// there is a process stalled past its guard).
    public init(
        latency: Duration = .milliseconds(20), declineAtOrAbove: Int = 1_000_000,
        ledger: (any ChargeLedger)? = MemoryChargeLedger(),
        beforeCommit: (@Sendable () -> Void)? = nil,
        beforeCall: (@Sendable (EffectRecord) async -> Void)? = nil
    ) {
        self.latency = latency
        self.declineAtOrAbove = declineAtOrAbove
        self.ledger = ledger
        self.beforeCommit = beforeCommit
        self.beforeCall = beforeCall
        // Charge ids stay unique across restarts of the process, too.
        self.prefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }

    public func charge(_ payment: PaymentPlugin.Payment, context: EffectContext) async throws -> PaymentOutcome {
        try await context.sleep(for: latency)
        beforeCommit?()
        // The commit point: past it a drain lets the charge finish; before it, a cancellation
        // (or a lease no longer safely held) stops it with nothing charged.
        let record = try context.commit()
        if payment.amount >= declineAtOrAbove {
            declines.increment()
            return .declined("amount-limit")
        }
        let number = sequence.wrappingAdd(1, ordering: .relaxed).newValue
        let chargeID = "ch_\(prefix)_\(number)"
        guard let ledger, let record else {
            payments.increment()
            return .charged(chargeID)
        }
        if let beforeCall { await beforeCall(record) }
        let answer: LedgerAnswer
        do {
            answer = try await ledger.charge(
                LedgerCall(record: record.downstreamKey, fence: record.fence, amount: payment.amount, chargeID: chargeID),
                on: context.loop)
        } catch {
            throw CommitRefusal(code: .downstreamUnavailable, message: error.message, value: record.description)
        }
        switch answer {
        case .charged(let id):
            payments.increment()
            return .charged(id)
        case .alreadyCharged(let id):
            returned.increment()
            return .alreadyCharged(id)
        case .stale(let newest):
            stale.increment()
            throw CommitRefusal(
                code: .staleFence, message: "the ledger has seen a newer fence for this record (\(newest))",
                value: record.description)
        }
    }

    public var counters: [PluginCounter] { [payments, declines, returned, stale] }
}
