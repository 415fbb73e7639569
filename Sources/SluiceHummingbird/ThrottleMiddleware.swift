#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHTTPCodec

/// A throttle per key in front of the rest of the chain: a key's first request in each window
/// runs it, the others are answered 429 at once. The gate decides on the thread that handles the
/// request (no hop).
///
/// The key closure names what is throttled (a user and a post, a button); `nil` means the
/// request is not governed and passes through untouched. Every governed answer carries
/// `RateLimit-Policy: "<name>";q=1;w=<window>` and `RateLimit` (`r=0`: a request that ran
/// leaves nothing for the window); a refused one (429, or 503 when the throttle cannot decide:
/// its table is full, its shared store is unavailable) also `Retry-After`, in whole seconds.
///
/// ```swift
/// router.add(middleware: ThrottleMiddleware(likes, gate: gate) { request, context in
///     context.parameters.get("post").map { "\(request.headers[.authorization] ?? "-") \($0)" }
/// })
/// ```
public struct ThrottleMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The rule deciding.
    public let rule: ThrottleRule
    /// The gate the rule was registered for.
    public let gate: Gate
    private let key: @Sendable (Request, Context) -> String?
    /// The fields of a request that ran, made once.
    private let ranFields: HTTPFields

    /// A middleware throttling the requests `key` names with `rule`, on `gate`.
    ///
    /// - Parameters:
    ///   - rule: a rule registered in the registry `gate` was made from.
    ///   - gate: the shared gate.
    ///   - key: what a request is throttled by, or `nil` to let it through ungoverned.
    ///     A key is 1 to 256 bytes of UTF-8: a request with an empty or a longer one is
    ///     answered 400 `bad-key` (hash a long value, or name what it stands for).
    public init(_ rule: ThrottleRule, gate: Gate, key: @escaping @Sendable (Request, Context) -> String?) {
        self.rule = rule
        self.gate = gate
        self.key = key
        var fields = HTTPFields()
        rule.fields.add(to: &fields, remaining: 0, reset: .seconds(rule.fields.windowSeconds))
        ranFields = fields
    }

    /// Decides about `request`, then runs the rest of the chain or answers 429.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let key = key(request, context) else { return try await next(request, context) }
        if let refusal = RuleKey.refusal(for: key) { return refusal }
        let outcome = await rule.decide(key, on: gate)
        // The route does not run: an idempotency middleware in front releases its record.
        guard case .ran = outcome else { return InnerRefusal.refuse(outcome, with: rule.refusals) }
        return try await FieldsAddedError.adding(ranFields) { try await next(request, context) }
    }
}
#endif
