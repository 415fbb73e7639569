import HTTPTypes
import Sluice
import SluiceButtonTap
import SluiceLibevent

/// `POST /tap/<key>` → 200 `{"tap":<n>}` (n: this key's taps that ran) · 429 `throttled` with
/// `Retry-After`; both with `RateLimit-Policy: "tap";q=1;w=<window>` and `RateLimit`.
public struct TapHTTPCodec: HTTPCodec {
    public typealias Plugin = ButtonTapPlugin

    public let method = HTTPRequest.Method.post
    public let path = "/tap/"
    /// The throttle's rate-limit fields.
    public let limits: RateLimitFields
    private let ranLimitValue: String

    /// The codec for `plugin`'s requests.
    public init(_ plugin: ButtonTapPlugin) {
        let window: Duration
        if case .throttle(let options) = plugin.policy {
            window = options.interval
        } else {
            window = .seconds(1)
        }
        limits = .throttle(name: "tap", window: window)
        // A tap that ran leaves nothing for a window.
        ranLimitValue = limits.limitValue(remaining: 0, reset: .seconds(limits.windowSeconds))
    }

    public func decode(_ request: HTTPServerRequest, rest: Substring) throws(HTTPProblem) -> String {
        try HTTPPathKey.decode(rest)
    }

    public func encode(_ outcome: GateOutcome<Int>, for input: Plugin.Input) -> HTTPAnswer {
        guard case .ran(let taps, _) = outcome else { return HTTPOutcomeMapping.answer(for: outcome, limits: limits) }
        var json = JSONText()
        json.member("tap", taps)
        var answer = HTTPAnswer.json(.ok, json.finished())
        answer.fields[.rateLimitPolicy] = limits.policyValue
        answer.fields[.rateLimit] = ranLimitValue
        return answer
    }
}
