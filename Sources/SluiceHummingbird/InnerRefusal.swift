#if Hummingbird
import Hummingbird
import Sluice
import SluiceHTTPCodec
import Synchronization

/// How ``IdempotencyMiddleware`` tells a refusal by Sluice's own middleware behind it (a
/// ``RateLimitMiddleware`` or ``ThrottleMiddleware`` answering 429 or 503: the route did not
/// run) from any other answer of the chain, which it stores whatever its status.
///
/// The idempotency middleware binds a marker to the task that runs the chain; the rate limit
/// and the throttle mark it when they refuse. Nothing shows on the wire, and without an
/// idempotency middleware in front no marker is bound and marking does nothing.
enum InnerRefusal {
    /// Whether a refusal was made in the chain it was bound for.
    final class Marker: Sendable {
        private let refused = Atomic<Bool>(false)

        /// Whether Sluice's middleware refused the request.
        var isRefused: Bool { refused.load(ordering: .relaxed) }

        /// Records a refusal.
        func mark() { refused.store(true, ordering: .relaxed) }
    }

    /// The marker of the idempotent chain this task runs, if any.
    @TaskLocal static var marker: Marker?

    /// Records that Sluice's middleware refused the request (it did not run the rest of the
    /// chain), for an idempotency middleware in front of it.
    static func mark() {
        marker?.mark()
    }

    /// The response of a rate limit or throttle whose refusals are `refusals` to a request it
    /// refuses with `outcome` (anything but `.ran`), marked.
    static func refuse(_ outcome: GateOutcome<Void>, with refusals: RefusalResponses) -> Response {
        mark()
        return refusals.made(for: outcome).response
    }

    /// The answer of a rate limit or throttle with fields `limits` that refuses a request with
    /// `outcome` (anything but `.ran`): its 429 or 503 carries `RateLimit-Policy` and
    /// `RateLimit` (`r=0`, `t` the `Retry-After` it gives, else 1 s) like every answer it governs.
    static func answer(_ outcome: GateOutcome<Void>, limits: RateLimitFields) -> HTTPAnswer {
        var answer = HTTPOutcomeMapping.answer(for: outcome, limits: limits)
        if answer.fields[.rateLimitPolicy] == nil {
            let seconds = answer.fields[.retryAfter].flatMap { Int($0) } ?? 1
            limits.add(to: &answer.fields, remaining: 0, reset: .seconds(seconds))
        }
        return answer
    }
}
#endif
