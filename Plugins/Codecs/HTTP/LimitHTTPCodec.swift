import HTTPTypes
import Sluice
import SluiceHTTPCodec
import SluiceLibevent
import SluiceRateLimit

/// `POST /limit/<key>[?cost=<n>]` (GCRA) → 200 `{"limit":<n>,"remaining":<n>,"reset_ms":<n>}` ·
/// 429 `limited` with `Retry-After` · 400 `bad-cost`; both with `RateLimit-Policy` and
/// `RateLimit`.
public struct LimitHTTPCodec: HTTPCodec {
    public typealias Plugin = RateLimitPlugin

    public let method = HTTPRequest.Method.post
    public let path = "/limit/"
    /// The limit's rate-limit fields.
    public let limits: RateLimitFields
    private let limit: Int

    /// The codec for `plugin`'s requests.
    public init(_ plugin: RateLimitPlugin) {
        limits = .gcra(name: "limit", options: plugin.options)
        limit = plugin.options.limit
    }

    public func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> RateLimitPlugin.Check {
        let key = try HTTPPathKey.decode(rest)
        guard let text = HTTPPathKey.queryValue("cost", in: request.query?[...]) else { return RateLimitPlugin.Check(key: key) }
        guard text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let cost = Int(text),
            (1...limit).contains(cost)
        else {
            throw HTTPProblem(.badRequest, "bad-cost", detail: "the cost must be an integer from 1 to \(limit)")
        }
        return RateLimitPlugin.Check(key: key, cost: cost)
    }

    public func encode(_ outcome: GateOutcome<Void>, for input: Plugin.Input) -> HTTPAnswer {
        guard case .ran(_, let info) = outcome else { return HTTPOutcomeMapping.answer(for: outcome, limits: limits) }
        var json = JSONText()
        guard let decision = info.rateLimit else { return .json(.ok, json.finished()) }
        json.member("limit", decision.limit)
        json.member("remaining", decision.remaining)
        json.member("reset_ms", Int(clamping: decision.resetAfter.nanosecondsClamped / 1_000_000 + (decision.resetAfter.nanosecondsClamped % 1_000_000 == 0 ? 0 : 1)))
        var answer = HTTPAnswer.json(.ok, json.finished())
        limits.add(to: &answer.fields, remaining: decision.remaining, reset: decision.resetAfter)
        return answer
    }
}
