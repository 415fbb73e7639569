import SluiceCore

/// Why a rate or concurrency limit refused a request (``GateOutcome/limited(_:)``): the stage
/// that refused and what it decided, with the state of every rate stage decided for it.
public struct LimitRefusal: Sendable, Hashable {
    /// The refusing stage's name: the plugin's name for its own ``GatePolicy/rateLimit(_:)``,
    /// the stage's name for a stage of its ``GatePlugin/limits``.
    public var stage: String
    /// What the refusing stage decided.
    public var verdict: StageVerdict
    /// The plugin's rate stages decided for this request, in order, up to the refusing one
    /// (included when it is a rate stage): the earlier ones after giving back what this
    /// request took. Empty for a refusal by the plugin's own policy.
    public var reports: [RateStageReport]

    /// A refusal by stage `stage`.
    public init(stage: String, verdict: StageVerdict, reports: [RateStageReport] = []) {
        self.stage = stage
        self.verdict = verdict
        self.reports = reports
    }

    /// The rate limiter's decision, when a rate stage refused.
    public var rateLimit: RateLimitDecision? {
        if case .rate(let decision) = verdict { return decision }
        return nil
    }

    /// When the request would fit, for a rate stage's refusal (`nil` when its cost never fits);
    /// always `nil` for a concurrency stage's, whose slot frees when a running effect ends.
    public var retryAfter: Duration? { rateLimit?.retryAfter }

    /// The refusing stage's limit: the GCRA's `limit` (burst + 1) or the concurrency limit.
    public var limit: Int {
        switch verdict {
        case .rate(let decision): decision.limit
        case .concurrency(let limit, _, _): limit
        }
    }
}

/// The state of one rate stage for one request: its name, options and decision (what fronts
/// render as one item of the `RateLimit-Policy` and `RateLimit` fields).
public struct RateStageReport: Sendable, Hashable {
    /// The stage's name.
    public var stage: String
    /// Its options.
    public var options: RateLimitOptions
    /// Its decision (after the request, or after giving back what it took).
    public var decision: RateLimitDecision

    /// A report of stage `stage`.
    public init(stage: String, options: RateLimitOptions, decision: RateLimitDecision) {
        self.stage = stage
        self.options = options
        self.decision = decision
    }
}
