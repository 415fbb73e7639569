import Sluice
import SluiceLineProtocol
import SluiceRateLimit

/// `LIMIT <key> [<cost>]` → `OK limit=<n> remaining=<n> reset-ms=<n>` ·
/// `LIMITED policy=limit retry-after-ms=<n> limit=<n> remaining=0 reset-ms=<n>`; `ERR bad-cost` for a cost
/// that is not an integer from 1 to the limit.
public struct LimitLineCodec: LineCodec {
    public typealias Plugin = RateLimitPlugin

    public let verb = "LIMIT"
    private let limit: Int

    /// The codec for `plugin`'s requests.
    public init(_ plugin: RateLimitPlugin) {
        limit = plugin.options.limit
    }

    public func decode(_ arguments: Substring) throws(RequestError) -> RateLimitPlugin.Check {
        let fields = arguments.split(separator: " ", omittingEmptySubsequences: false)
        guard (1...2).contains(fields.count), let key = RequestLine.key(fields[0]) else { throw .usage }
        guard fields.count == 2 else { return RateLimitPlugin.Check(key: key) }
        guard let cost = RequestLine.integer(fields[1], in: 1...limit) else {
            throw .invalid("bad-cost", message: "the cost must be an integer from 1 to \(limit)")
        }
        return RateLimitPlugin.Check(key: key, cost: cost)
    }

    public func encode(_ output: Void, _ info: RunInfo, into reply: inout LineReply) {
        guard let decision = info.rateLimit else {
            reply.append("OK")
            return
        }
        reply.append("OK limit=")
        reply.append(decision.limit)
        reply.append(" remaining=")
        reply.append(decision.remaining)
        reply.append(" reset-ms=")
        reply.append(milliseconds: decision.resetAfter)
    }

    public func encode(_ outcome: GateOutcome<Void>, into reply: inout LineReply) {
        switch outcome {
        case .ran(let output, let info):
            encode(output, info, into: &reply)
        case .limited(let refusal):
            // A refused request reports nothing left for it: what remains is less than its cost.
            reply.appendLimited(refusal)
        default:
            reply.appendStandard(outcome)
        }
    }

    /// A rate-limit check finishes at once: there is nothing for `CANCEL` to reach.
    public var isCancellable: Bool { false }
}
