import HTTPTypes
import Sluice
import SluiceButtonTap
import SluiceHTTPCodec
import SluiceLibevent

/// `POST /tap/<key>` → 200 `{"tap":<n>}` (n: this key's taps that ran) · 429 `throttled` with
/// `Retry-After`; both with `RateLimit-Policy: "tap";q=1;w=<window>` and `RateLimit`.
public struct TapHTTPCodec: HTTPCodec {
    public typealias Plugin = ButtonTapPlugin

    public let method = HTTPRequest.Method.post
    public let path = "/tap/"
    /// The throttle's rate-limit fields.
    public let limits: RateLimitFields
    /// The header fields of a tap that ran, made once.
    private let ranFields: HTTPFields
    /// The 429 answers for a retry of 1, 2, … seconds (up to a minute), made once.
    private let throttledAnswers: [HTTPAnswer]

    /// The codec for `plugin`'s requests.
    public init(_ plugin: ButtonTapPlugin) {
        let window: Duration
        if case .throttle(let options) = plugin.policy {
            window = options.interval
        } else {
            window = .seconds(1)
        }
        let limits = RateLimitFields.throttle(name: "tap", window: window)
        self.limits = limits
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.rateLimitPolicy] = limits.policyValue
        // A tap that ran leaves nothing for a window.
        fields[.rateLimit] = limits.limitValue(remaining: 0, reset: .seconds(limits.windowSeconds))
        ranFields = fields
        throttledAnswers = (1...min(limits.windowSeconds, 60)).map {
            HTTPOutcomeMapping.throttled(retryAfter: .seconds($0), limits: limits)
        }
    }

    public func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> String {
        try HTTPPathKey.decode(rest)
    }

    public func encode(_ outcome: GateOutcome<Int>, for input: Plugin.Input) -> HTTPAnswer {
        switch outcome {
        case .ran(let taps, _):
            var json = JSONText()
            json.member("tap", taps)
            return HTTPAnswer(status: .ok, fields: ranFields, body: json.finished())
        case .throttled(let retryAfter):
            let seconds = max(1, RateLimitFields.wholeSeconds(retryAfter))
            if seconds <= throttledAnswers.count { return throttledAnswers[seconds - 1] }
            return HTTPOutcomeMapping.throttled(retryAfter: retryAfter, limits: limits)
        default:
            return HTTPOutcomeMapping.answer(for: outcome, limits: limits)
        }
    }
}
