import Sluice

/// Payments that run exactly once: `PAY <key> <idem> <amount>`.
///
/// The record is `(key, idem)` and the fingerprint is the amount. The first request charges
/// through the ``PaymentProcessor``; a duplicate while it runs waits for it; every duplicate
/// gets the stored reply plus ` replayed=true`; the same record with another amount replies
/// `MISMATCH`. Declines are stored and replayed like charges. Payments run in the key's scope:
/// a client that disconnects mid-payment finds it completed and replayable on retry.
public struct PaymentPlugin: GatePlugin {
    /// A parsed `PAY` request.
    public struct Payment: Sendable, Hashable {
        /// The account (or user) key.
        public let key: String
        /// The client's idempotency key.
        public let idem: String
        /// The amount in minor units, 1…999,999,999.
        public let amount: Int
    }

    public let name = "pay"
    public let verb = "PAY"
    public let policy: GatePolicy
    /// The processor that charges.
    public let processor: any PaymentProcessor

    /// The largest amount accepted.
    public static let maximumAmount = 999_999_999

    /// A plugin keeping records for `retention`, charging through `processor`.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` when `retention` is not positive.
    public init(retention: Duration = IdempotencyOptions.payment.retention, processor: any PaymentProcessor) throws(SluiceError) {
        let preset = IdempotencyOptions.payment
        policy = .idempotent(
            try IdempotencyOptions(
                retention: retention, lease: preset.lease, concurrent: preset.concurrent, cacheErrors: preset.cacheErrors))
        self.processor = processor
    }

    public func parse(_ arguments: Substring) throws(RequestError) -> Payment {
        guard let fields = RequestLine.fields(arguments, count: 3),
            let key = RequestLine.key(fields[0]),
            let idem = RequestLine.key(fields[1])
        else { throw .usage }
        guard let amount = Self.amount(fields[2]) else {
            throw .invalid("bad-amount", message: "the amount must be an integer from 1 to \(Self.maximumAmount)")
        }
        return Payment(key: key, idem: idem, amount: amount)
    }

    /// `text` as an amount: decimal digits only, 1…999,999,999.
    static func amount(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int(text), (1...maximumAmount).contains(value)
        else { return nil }
        return value
    }

    public func key(for input: Payment) -> String { input.key }

    public func idempotency(for input: Payment) -> IdempotencyIdentity {
        // A space cannot occur in a key or an idem, so the pair is unambiguous.
        IdempotencyIdentity(record: "\(input.key) \(input.idem)", fingerprint: String(input.amount))
    }

    public func handle(_ input: Payment, context: EffectContext) async throws -> PaymentOutcome {
        try await processor.charge(input, context: context)
    }

    public func reply(for output: PaymentOutcome) -> PluginReply {
        switch output {
        case .charged(let id): PluginReply("OK charge=\(id)")
        case .declined(let reason): PluginReply("DECLINED reason=\(reason)", isError: true)
        }
    }

    public var counters: [PluginCounter] { processor.counters }
}

/// What a charge came to.
public enum PaymentOutcome: Sendable, Hashable {
    /// Charged, with the processor's charge id.
    case charged(String)
    /// Declined, with a reason such as `amount-limit`.
    case declined(String)
}

/// Charges payments. It must honour cancellation until it commits, and not after.
public protocol PaymentProcessor: Sendable {
    /// Charges `payment`; throws `CancellationError` if cancelled before committing.
    func charge(_ payment: PaymentPlugin.Payment, context: EffectContext) async throws -> PaymentOutcome
    /// Counters reported in `STATS`.
    var counters: [PluginCounter] { get }
}
