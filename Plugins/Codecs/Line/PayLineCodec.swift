import Sluice
import SluiceLineProtocol
import SluicePayment

/// `PAY <key> <idem> <amount>` → `OK charge=<cid>` · `DECLINED reason=<r>` · either with
/// ` replayed=true` (a duplicate: joined while it ran, or replayed after) and
/// ` guarantee=local` (decided by this instance alone: its shared store did not answer) or
/// ` guarantee=store-data-lost` (the shared store lost its data less than a retention ago: a
/// payment completed before may have been charged again when retried) ·
/// `MISMATCH` · `CANCELLED` · `ERR conflict` (a duplicate while it runs, when duplicates are
/// refused) · `ERR busy` · `ERR unavailable` (the shared store did not answer); `ERR bad-amount`
/// for an amount that is not an integer 1…999,999,999.
public struct PayLineCodec: LineCodec {
    public typealias Plugin = PaymentPlugin

    public let verb = "PAY"
    public let counters: [PluginCounter]

    /// The codec for `plugin`'s requests; `STATS` reports its processor's counters.
    public init(_ plugin: PaymentPlugin) {
        counters = plugin.processor.counters
    }

    public func decode(_ arguments: Substring) throws(RequestError) -> PaymentPlugin.Payment {
        guard let fields = RequestLine.fields(arguments, count: 3),
            let key = RequestLine.key(fields[0]),
            let idem = RequestLine.key(fields[1])
        else { throw .usage }
        guard let amount = RequestLine.integer(fields[2], in: 1...PaymentPlugin.maximumAmount) else {
            throw .invalid("bad-amount", message: "the amount must be an integer from 1 to \(PaymentPlugin.maximumAmount)")
        }
        return PaymentPlugin.Payment(key: key, idem: idem, amount: amount)
    }

    public func encode(_ output: PaymentOutcome, _ info: RunInfo, into reply: inout LineReply) {
        switch output {
        case .charged(let id), .alreadyCharged(let id):
            reply.append("OK charge=")
            reply.append(id)
        case .declined(let reason):
            reply.append("DECLINED reason=")
            reply.append(reason)
        }
        // A charge the processor had made for this record before is a replay too.
        if info.source != .executed || output.isAlreadyCharged { reply.append(" replayed=true") }
        if let guarantee = LineGuarantee.word(for: info.guarantee) {
            reply.append(" guarantee=")
            reply.append(guarantee)
        }
    }
}
