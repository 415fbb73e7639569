import Sluice

/// Payments that run exactly once per `(key, idem)`.
///
/// The record is `(key, idem)` and the fingerprint is the amount. The first request charges
/// through the ``PaymentProcessor``; a duplicate while it runs joins it (or is refused as a
/// conflict, with `concurrent: .reject`); every later duplicate gets the stored outcome as a
/// replay; the same record with another amount is a mismatch. Declines are stored and replayed
/// like charges. Payments run in the key's scope: a caller that goes away mid-payment finds it
/// completed and replayable when it retries.
public struct PaymentPlugin: GatePlugin {
    /// A payment request.
    public struct Payment: Sendable, Hashable {
        /// The account (or user) key.
        public let key: String
        /// The client's idempotency key.
        public let idem: String
        /// The amount in minor units, 1…``PaymentPlugin/maximumAmount``.
        public let amount: Int
        /// What a duplicate of this payment gets while the first still runs: joins it or is
        /// refused (`conflict`); `nil` follows the plugin's `concurrent`.
        public let concurrent: IdempotencyOptions.Concurrent?

        /// A payment of `amount` for `key` under the idempotency key `idem`; `concurrent`
        /// overrides the plugin's choice for a duplicate that arrives while the first runs.
        public init(key: String, idem: String, amount: Int, concurrent: IdempotencyOptions.Concurrent? = nil) {
            self.key = key
            self.idem = idem
            self.amount = amount
            self.concurrent = concurrent
        }
    }

    public let name = "pay"
    public let policy: GatePolicy
    /// The limits a new payment passes after its record is opened (see
    /// ``PaymentPlugin/accountLimits(rate:concurrency:)``); a replay, a joined duplicate, a
    /// mismatch or a conflict spends none of them.
    public let limits: [LimitStage<Payment>]
    /// The processor that charges.
    public let processor: any PaymentProcessor

    /// The largest amount accepted.
    public static let maximumAmount = 999_999_999

    /// New payments one account may open by default: this many back to back, and this many
    /// more per retention period.
    public static let defaultRecordsPerKey = 100

    /// A plugin keeping records for `retention`, charging through `processor`; a duplicate that
    /// arrives while the first runs joins it (`.join`) or is refused (`.reject`). On a shared
    /// store, a running charge holds its record for `lease` at a time and renews it while it runs
    /// (a lease that runs out means its owner died, and another instance may take it over). One account
    /// opens at most `recordsPerKey` new payments back to back and `recordsPerKey` more per
    /// `retention`; past that its new payments are refused (`busy`), and only its own.
    ///
    /// A new payment then passes `limits`, in order (none by default): one they refuse is
    /// `limited`, and its record is given back, so that the same idempotency key runs once the
    /// limit allows.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` when `retention` or `lease` is not
    ///   positive or `recordsPerKey` is below 1.
    public init(
        retention: Duration = IdempotencyOptions.payment.retention,
        lease: Duration = IdempotencyOptions.payment.lease,
        concurrent: IdempotencyOptions.Concurrent = IdempotencyOptions.payment.concurrent,
        recordsPerKey: Int? = PaymentPlugin.defaultRecordsPerKey,
        limits: [LimitStage<Payment>] = [],
        processor: any PaymentProcessor
    ) throws(SluiceError) {
        let preset = IdempotencyOptions.payment
        policy = .idempotent(
            try IdempotencyOptions(
                retention: retention, lease: lease, concurrent: concurrent, cacheErrors: preset.cacheErrors,
                recordsPerKey: recordsPerKey))
        self.processor = processor
        self.limits = limits
    }

    /// The limits per account (the payment's key) of `sluice-echo`'s payments: a GCRA named
    /// `pay-rate` when `rate` is set, then at most `concurrency` payments in flight, named
    /// `pay-concurrency`, when it is set.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` for a concurrency below 1.
    public static func accountLimits(rate: RateLimitOptions?, concurrency: Int?) throws(SluiceError) -> [LimitStage<Payment>] {
        var limits: [LimitStage<Payment>] = []
        if let rate { limits.append(try .rate("pay-rate", rate) { $0.key }) }
        if let concurrency { limits.append(try .concurrency("pay-concurrency", limit: concurrency) { $0.key }) }
        return limits
    }

    /// Whether `amount` is one this plugin charges: 1…``maximumAmount``.
    public static func isValidAmount(_ amount: Int) -> Bool {
        (1...maximumAmount).contains(amount)
    }

    public func key(for input: Payment) -> String { input.key }

    public func identity(for input: Payment) -> RequestIdentity {
        RequestIdentity(
            record: Self.record(key: input.key, idem: input.idem), fingerprint: String(input.amount),
            concurrent: input.concurrent)
    }

    /// The record of `(key, idem)`: `<key's byte count>:<key><idem>`, so that no two pairs make
    /// the same record. Written in one pass into one allocation (a replay makes no other).
    static func record(key: String, idem: String) -> String {
        var key = key
        var idem = idem
        let length = String(key.utf8.count)
        let total = length.utf8.count + 1 + key.utf8.count + idem.utf8.count
        return String(unsafeUninitializedCapacity: total) { buffer in
            var position = 0
            func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
                for byte in bytes {
                    buffer[position] = byte
                    position += 1
                }
            }
            var length = length
            length.withUTF8(copy)
            buffer[position] = UInt8(ascii: ":")
            position += 1
            key.withUTF8(copy)
            idem.withUTF8(copy)
            return position
        }
    }

    public func run(_ input: Payment, context: EffectContext) async throws -> PaymentOutcome {
        try await processor.charge(input, context: context)
    }

    public func isFailure(_ output: PaymentOutcome) -> Bool {
        if case .declined = output { return true }
        return false
    }
}

/// What a charge came to.
public enum PaymentOutcome: Sendable, Hashable, Codable {
    /// Charged, with the processor's charge id.
    case charged(String)
    /// The processor had charged this payment's record already (an earlier owner's call, one
    /// whose answer was lost) and returned that charge instead of making another: answered as
    /// a replay.
    case alreadyCharged(String)
    /// Declined, with a reason such as `amount-limit`.
    case declined(String)

    /// The charge id, when it was charged (now or before).
    public var chargeID: String? {
        switch self {
        case .charged(let id), .alreadyCharged(let id): id
        case .declined: nil
        }
    }

    /// Whether the charge was made before, by an earlier call for the same record.
    public var isAlreadyCharged: Bool {
        if case .alreadyCharged = self { return true }
        return false
    }
}

/// Charges payments. It must honour cancellation until it commits, and not after.
public protocol PaymentProcessor: Sendable {
    /// Charges `payment`; throws `CancellationError` if cancelled before committing.
    func charge(_ payment: PaymentPlugin.Payment, context: EffectContext) async throws -> PaymentOutcome
    /// Counters it keeps (charges, declines).
    var counters: [PluginCounter] { get }
}
