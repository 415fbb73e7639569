import HTTPTypes
import Sluice
import SluiceCore

/// How a typed `GateOutcome` becomes an HTTP answer, shared by every HTTP front (Sluice's own
/// HTTP front, framework middleware): the status, the header fields (`Retry-After`, the draft-11
/// `RateLimit` fields, `Idempotent-Replayed`) and an RFC 9457 problem body.
///
/// | outcome | status |
/// | --- | --- |
/// | throttled, limited | 429 with `Retry-After` (whole seconds, rounded up; none for a concurrency limit) and the rate-limit fields, one item per rate policy |
/// | superseded, cancelled | 409 `superseded` (also when a newer request replaced a running one), `cancelled`, or 503 when cancelled by a shutdown |
/// | mismatch | 422 |
/// | conflict | 409 |
/// | busy | 503 with `Retry-After: 1` |
/// | failed | 500 |
/// | shutting down | 503 |
///
/// `ran` outcomes are the route's to render (their body is the plugin's output).
public enum HTTPOutcomeMapping {
    // The refusals a flood is answered with, rendered once: their problem bodies never change
    // (a copy shares the body's bytes; the fields added to it are the copy's own).
    private static let throttledAnswer = HTTPProblem(
        .tooManyRequests, "throttled", detail: "this key was used less than a window ago"
    ).answer
    private static let limitedAnswer = HTTPProblem(
        .tooManyRequests, "limited", detail: "this key's rate limit is spent for now"
    ).answer
    private static let busyAnswer: HTTPAnswer = {
        var answer = HTTPProblem(.serviceUnavailable, "busy", detail: "the server has no room for this request now").answer
        answer.fields[.retryAfter] = "1"
        return answer
    }()

    /// The answer to an outcome other than `ran`, with `limits` (when the route has rate-limit
    /// fields) on the 429 answers.
    public static func answer<Output>(for outcome: GateOutcome<Output>, limits: RateLimitFields? = nil) -> HTTPAnswer {
        switch outcome {
        case .ran:
            return HTTPAnswer(status: .ok)
        case .throttled(let retryAfter):
            return throttled(retryAfter: retryAfter, limits: limits)
        case .limited(let refusal):
            return limited(refusal, limits: limits)
        case .superseded, .cancelled(.replaced):
            // Replaced while waiting (debounce) or while running (switch-latest): either way a
            // newer request for the key took its place.
            return HTTPProblem(.conflict, "superseded", detail: "a newer request for this key replaced this one").answer
        case .cancelled(.shutdown):
            // Nothing was committed: a retry (elsewhere, or once this server is back) runs it.
            var answer = HTTPProblem(.serviceUnavailable, "shutting-down", detail: "the server shut down before this request finished").answer
            answer.fields[.retryAfter] = "1"
            return answer
        case .cancelled:
            return HTTPProblem(.conflict, "cancelled", detail: "this request was cancelled before it finished").answer
        case .mismatch:
            return HTTPProblem(
                .unprocessableContent, "mismatch",
                detail: "this Idempotency-Key was used with another request body").answer
        case .conflict:
            var answer = HTTPProblem(
                .conflict, "conflict", detail: "a request with this Idempotency-Key is still being processed").answer
            answer.fields[.retryAfter] = "1"
            return answer
        case .busy:
            return busyAnswer
        case .failed:
            return HTTPProblem(.internalServerError, "internal", detail: "the request's effect failed").answer
        case .shuttingDown:
            var answer = HTTPProblem(.serviceUnavailable, "shutting-down", detail: "the server is shutting down").answer
            answer.fields[.retryAfter] = "1"
            return answer
        case .unavailable:
            var answer = HTTPProblem(
                .serviceUnavailable, "unavailable", detail: "the shared store did not answer; nothing was done").answer
            answer.fields[.retryAfter] = "1"
            return answer
        }
    }

    /// 429 for a throttled request: `Retry-After` and, with `limits`, `RateLimit-Policy` and
    /// `RateLimit` (`r=0`, `t` = the retry delay).
    public static func throttled(retryAfter: Duration, limits: RateLimitFields?) -> HTTPAnswer {
        var answer = throttledAnswer
        let seconds = max(1, RateLimitFields.wholeSeconds(retryAfter))
        answer.fields[.retryAfter] = String(seconds)
        if let limits {
            answer.fields[.rateLimitPolicy] = limits.policyValue
            answer.fields[.rateLimit] = limits.limitValue(remaining: 0, reset: .seconds(seconds))
        }
        return answer
    }

    /// 429 for a request a rate limit refused: `Retry-After` (when it would fit) and, with
    /// `limits`, the fields (`r=0`: what remains is less than the request's cost).
    public static func limited(_ decision: RateLimitDecision, limits: RateLimitFields?) -> HTTPAnswer {
        var answer = limitedAnswer
        if let retryAfter = decision.retryAfter {
            answer.fields[.retryAfter] = String(max(1, RateLimitFields.wholeSeconds(retryAfter)))
        }
        limits?.add(to: &answer.fields, remaining: 0, reset: decision.resetAfter)
        return answer
    }

    /// 429 for a request a limit refused, its problem naming the refusing stage (`"policy"`):
    /// `Retry-After` when a rate stage refused and the request would fit later (none for a
    /// concurrency stage: a slot frees when a running request ends), and the `RateLimit-Policy`
    /// and `RateLimit` fields with one item per rate policy — the route's own (`limits`, when it
    /// refused) and each rate stage of the plugin's chain decided for the request (the refusing
    /// one with `r=0`).
    public static func limited(_ refusal: LimitRefusal, limits: RateLimitFields?) -> HTTPAnswer {
        let detail: String
        switch refusal.verdict {
        case .rate: detail = "the rate limit '\(refusal.stage)' is spent for now"
        case .concurrency(let limit, _, _): detail = "'\(refusal.stage)' allows \(limit) in flight at once"
        }
        var answer = HTTPProblem(
            .tooManyRequests, "limited", detail: detail, extensions: ["policy": refusal.stage]).answer
        if let retryAfter = refusal.retryAfter {
            answer.fields[.retryAfter] = String(max(1, RateLimitFields.wholeSeconds(retryAfter)))
        }
        var items: [RateLimitItem] = []
        if refusal.reports.isEmpty, let limits, let decision = refusal.rateLimit {
            items.append(RateLimitItem(fields: limits, remaining: 0, reset: decision.resetAfter))
        }
        for report in refusal.reports {
            items.append(RateLimitItem(report, remaining: report.stage == refusal.stage ? 0 : report.decision.remaining))
        }
        RateLimitItem.set(items, on: &answer.fields)
        return answer
    }

    /// Adds the `RateLimit-Policy` and `RateLimit` fields of the plugin's rate stages
    /// (`RunInfo.limits`) to an answer of a request that ran; nothing when there are none.
    public static func addLimits(_ answer: inout HTTPAnswer, _ info: RunInfo) {
        RateLimitItem.set(info.limits.map { RateLimitItem($0, remaining: $0.decision.remaining) }, on: &answer.fields)
    }

    /// Marks an answer replayed from an idempotency record (or shared by a duplicate that joined
    /// the running first request): `Idempotent-Replayed: true`; one decided by this instance
    /// alone while its shared store was unavailable: `Sluice-Guarantee: local`; and one given
    /// less than a retention after the shared store lost its data:
    /// `Sluice-Guarantee: store-data-lost`.
    public static func markReplayed(_ answer: inout HTTPAnswer, _ info: RunInfo) {
        if info.source != .executed { answer.fields[.idempotentReplayed] = "true" }
        switch info.guarantee {
        case .store: break
        case .local: answer.fields[.sluiceGuarantee] = "local"
        case .storeDataLost: answer.fields[.sluiceGuarantee] = "store-data-lost"
        }
    }
}

/// One rate policy's item in the `RateLimit-Policy` and `RateLimit` fields.
private struct RateLimitItem {
    let fields: RateLimitFields
    let remaining: Int
    let reset: Duration

    init(fields: RateLimitFields, remaining: Int, reset: Duration) {
        self.fields = fields
        self.remaining = remaining
        self.reset = reset
    }

    /// The item of a chain's rate stage, reporting `remaining`.
    init(_ report: RateStageReport, remaining: Int) {
        self.init(
            fields: .gcra(name: report.stage, options: report.options), remaining: remaining,
            reset: report.decision.resetAfter)
    }

    /// Sets both fields to one item per entry of `items`, in order; nothing when it is empty.
    static func set(_ items: [RateLimitItem], on fields: inout HTTPFields) {
        guard !items.isEmpty else { return }
        fields[.rateLimitPolicy] = items.map(\.fields.policyValue).joined(separator: ", ")
        fields[.rateLimit] = items.map { $0.fields.limitValue(remaining: $0.remaining, reset: $0.reset) }.joined(separator: ", ")
    }
}
