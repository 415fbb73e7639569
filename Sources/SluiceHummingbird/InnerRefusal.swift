#if Hummingbird
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
}
#endif
