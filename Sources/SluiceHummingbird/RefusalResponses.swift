#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHTTPCodec
import SluiceLibevent
import Synchronization

/// The refusals a rule answers a flood with, each made once and handed out again while it is
/// one of the last few asked for.
///
/// A key over its limit is refused many times a second with the same answer: its status, its
/// problem body and its fields change only when the whole seconds of its `Retry-After` or
/// `RateLimit` reset do. Making that answer (a copy of the problem's fields, three field
/// values rendered, the body copied into a new buffer) cost more than the gate's decision, so
/// a rule keeps the last ``capacity`` answers it made, keyed by everything the answer is made
/// from (``Shape``). An outcome whose answer has more inputs than a shape holds (a refusal
/// naming a chain's other rate stages, a cancellation) is answered as before, made afresh.
final class RefusalResponses: Sendable {
    /// Everything a refusal's answer is made from, besides the rule's fields: two outcomes of
    /// one shape get the same answer.
    struct Shape: Hashable, Sendable {
        enum Kind: Hashable, Sendable {
            case throttled
            case limitedByRate
            case limitedByConcurrency(limit: Int)
            case busy
        }

        var kind: Kind
        /// The refusing stage (limited), else empty.
        var stage: String
        /// `Retry-After` in whole seconds as the answer writes it, or `nil` when it has none.
        var retryAfterSeconds: Int?
        /// The `RateLimit` reset in whole seconds as the answer writes it, or `nil`.
        var resetSeconds: Int?

        /// The shape of `outcome`'s answer, or `nil` when it has inputs a shape does not hold.
        init?(_ outcome: GateOutcome<Void>) {
            switch outcome {
            case .throttled(let retryAfter):
                self.init(kind: .throttled, stage: "", retryAfterSeconds: max(1, RateLimitFields.wholeSeconds(retryAfter)))
            case .limited(let refusal) where refusal.reports.isEmpty:
                let kind: Kind
                switch refusal.verdict {
                case .rate: kind = .limitedByRate
                case .concurrency(let limit, _, _): kind = .limitedByConcurrency(limit: limit)
                }
                self.init(
                    kind: kind, stage: refusal.stage,
                    retryAfterSeconds: refusal.retryAfter.map { max(1, RateLimitFields.wholeSeconds($0)) },
                    resetSeconds: refusal.rateLimit.map { RateLimitFields.wholeSeconds($0.resetAfter) })
            case .busy:
                self.init(kind: .busy, stage: "")
            default:
                return nil
            }
        }

        init(kind: Kind, stage: String, retryAfterSeconds: Int? = nil, resetSeconds: Int? = nil) {
            self.kind = kind
            self.stage = stage
            self.retryAfterSeconds = retryAfterSeconds
            self.resetSeconds = resetSeconds
        }
    }

    /// An answer made, and the response written from it.
    struct Made: Sendable {
        let shape: Shape
        let answer: HTTPAnswer
        let response: Response
    }

    /// How many answers a rule keeps: a flood on one key needs one a second, a few keys
    /// refused together a few.
    static var capacity: Int { 4 }

    /// The fields of the rule whose refusals these are.
    let limits: RateLimitFields
    /// The answers made lately, the most recent first.
    private let recent = Mutex<[Made]>([])

    /// Refusals of the rule with fields `limits`.
    init(limits: RateLimitFields) {
        self.limits = limits
    }

    /// The shapes of the answers kept, the most recent first.
    var keptShapes: [Shape] { recent.withSanitizedLock { $0.map(\.shape) } }

    /// The answer to `outcome` (anything but `.ran`) and its response: one made before for an
    /// outcome of the same shape, or made now (and kept, when it has a shape).
    func made(for outcome: GateOutcome<Void>) -> (answer: HTTPAnswer, response: Response) {
        guard let shape = Shape(outcome) else {
            let answer = InnerRefusal.answer(outcome, limits: limits)
            return (answer, answer.response)
        }
        if let made = recent.withSanitizedLock({ $0.first { $0.shape == shape } }) {
            return (made.answer, made.response)
        }
        let answer = InnerRefusal.answer(outcome, limits: limits)
        let fresh = Made(shape: shape, answer: answer, response: answer.response)
        // Another thread may have made the same answer meanwhile: the first one kept stays, so
        // the few kept are all different.
        let made = recent.withSanitizedLock { recent -> Made in
            if let kept = recent.first(where: { $0.shape == shape }) { return kept }
            recent.insert(fresh, at: 0)
            if recent.count > Self.capacity { recent.removeLast() }
            return fresh
        }
        return (made.answer, made.response)
    }
}
#endif
