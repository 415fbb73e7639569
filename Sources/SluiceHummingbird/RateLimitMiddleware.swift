#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHTTPCodec

/// A GCRA rate limit per key in front of the rest of the chain.
///
/// The key closure names what the limit counts (a user, an API key, an address); `nil` means
/// the request is not governed and passes through untouched. A governed request is decided by the
/// gate on the thread that handles it (no hop): within the limit it runs the rest of the chain and its
/// response gets the draft-11 `RateLimit-Policy` and `RateLimit` fields; over it, the answer is
/// 429 with `Retry-After` and the same fields (an RFC 9457 problem body); when the limit cannot
/// decide (its table is full, its shared store is unavailable, the gate shuts down), 503 with
/// the same fields (`r=0`, `t` its `Retry-After`). In shadow mode nothing is refused: a request
/// over the limit is reported (the fields with `r=0`, the rule's `shadowLimited` counter, the
/// gate's metrics) and passes through, and one the limit could not decide passes through with
/// `RateLimit-Policy` alone, counted in `shadowUndecided`.
///
/// ```swift
/// router.add(middleware: RateLimitMiddleware(searchLimit, gate: gate) { request, _ in
///     request.headers[.authorization]
/// })
/// ```
public struct RateLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The rule deciding.
    public let rule: RateLimitRule
    /// The gate the rule was registered for.
    public let gate: Gate
    private let key: @Sendable (Request, Context) -> String?

    /// A middleware limiting the requests `key` names with `rule`, on `gate`.
    ///
    /// - Parameters:
    ///   - rule: a rule registered in the registry `gate` was made from.
    ///   - gate: the shared gate.
    ///   - key: what a request counts against, or `nil` to let it through ungoverned.
    ///     A key is 1 to 256 bytes of UTF-8: a request with an empty or a longer one is
    ///     answered 400 `bad-key` (hash a long value, or name what it stands for).
    public init(_ rule: RateLimitRule, gate: Gate, key: @escaping @Sendable (Request, Context) -> String?) {
        self.rule = rule
        self.gate = gate
        self.key = key
    }

    /// Decides about `request`, then runs the rest of the chain or answers 429.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let key = key(request, context) else { return try await next(request, context) }
        if let refusal = RuleKey.refusal(for: key) { return refusal }
        let outcome = await rule.decide(key, on: gate)
        var fields = HTTPFields()
        switch outcome {
        case .ran(_, let info):
            if let decision = info.rateLimit {
                rule.fields.add(to: &fields, remaining: decision.remaining, reset: decision.resetAfter)
            }
        case .limited(let refusal) where rule.shadowMode:
            rule.shadowLimited.increment()
            rule.fields.add(to: &fields, remaining: 0, reset: refusal.rateLimit?.resetAfter ?? .zero)
        case .limited, .throttled:
            // The route does not run: an idempotency middleware in front releases its record.
            return InnerRefusal.refuse(outcome, with: rule.refusals)
        default:
            // Undecided (busy, the store unavailable, shutting down, cancelled): shadow mode
            // never refuses, so the request passes, counted; otherwise it is refused, 503.
            guard rule.shadowMode else { return InnerRefusal.refuse(outcome, with: rule.refusals) }
            rule.shadowUndecided.increment()
            fields[.rateLimitPolicy] = rule.fields.policyValue
        }
        return try await FieldsAddedError.adding(fields) { try await next(request, context) }
    }
}
#endif
