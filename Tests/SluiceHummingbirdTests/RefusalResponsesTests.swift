#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceCore
import SluiceHTTP
@testable import SluiceHummingbird
import Testing

@Suite struct RefusalResponsesTests {
    /// Refusals of one shape, drawn so that shapes repeat (whole seconds from a few) while the
    /// nanoseconds beneath them differ.
    static func outcome(_ random: inout SplitMix64, other: RateLimitOptions) -> GateOutcome<Void> {
        func duration() -> Duration {
            .nanoseconds(Int64.random(in: 0...3) * 1_000_000_000 + Int64.random(in: -1...1, using: &random) * Int64.random(in: 0...999_999_999, using: &random))
        }
        func decision() -> RateLimitDecision {
            let retry = Bool.random(using: &random) ? duration() : nil
            return RateLimitDecision(
                allowed: false, limit: Int.random(in: 1...3, using: &random), remaining: Int.random(in: 0...2, using: &random),
                retryAfter: retry, resetAfter: duration())
        }
        let stage = ["like", "search", "pay"].randomElement(using: &random) ?? "like"
        switch Int.random(in: 0..<7, using: &random) {
        case 0: return .throttled(retryAfter: duration())
        case 1, 2: return .limited(LimitRefusal(stage: stage, verdict: .rate(decision())))
        case 3:
            let limit = Int.random(in: 1...2, using: &random)
            return .limited(LimitRefusal(stage: stage, verdict: .concurrency(limit: limit, inFlight: limit, allowed: false)))
        case 4:
            // A chain's refusal that reports its other rate stages: made afresh every time.
            let report = RateStageReport(stage: "other", options: other, decision: decision())
            return .limited(LimitRefusal(stage: stage, verdict: .rate(decision()), reports: [report]))
        case 5: return .busy
        default: return [.unavailable, .shuttingDown, .cancelled(.shutdown)].randomElement(using: &random) ?? .busy
        }
    }

    @Test func aKeptAnswerIsTheOneMadeAfreshForEveryOutcome() throws {
        var random = SplitMix64(seed: 0x0051_CE)
        let limits = RateLimitFields(name: "rule", quota: 2, window: .seconds(3))
        let refusals = RefusalResponses(limits: limits)
        let other = try RateLimitOptions(count: 1, per: .seconds(1), burst: 0)
        var kept = 0
        for _ in 0..<2_000 {
            let outcome = Self.outcome(&random, other: other)
            let fresh = InnerRefusal.answer(outcome, limits: limits)
            let made = refusals.made(for: outcome)
            #expect(made.answer == fresh, "outcome \(outcome)")
            let response: Response = fresh.response
            #expect(made.response.status == response.status)
            #expect(made.response.headers == response.headers)
            if RefusalResponses.Shape(outcome) != nil { kept += 1 }
        }
        // Most outcomes have a shape: the property is about answers handed out again.
        #expect(kept > 1_200)
    }

    @Test func answersMadeAtOnceOnManyThreadsAreKeptOnce() async {
        let refusals = RefusalResponses(limits: .throttle(name: "like", window: .seconds(1)))
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<64 {
                group.addTask {
                    for round in 0..<50 {
                        _ = refusals.made(for: .throttled(retryAfter: .milliseconds(100 + task + round)))
                        _ = refusals.made(for: .throttled(retryAfter: .milliseconds(1_100 + task + round)))
                    }
                }
            }
        }
        // Two shapes (Retry-After 1 and 2), each kept once however the threads raced.
        #expect(Set(refusals.keptShapes).count == refusals.keptShapes.count)
        #expect(refusals.keptShapes.count == 2)
    }

    @Test func theSameShapeIsHandedOutAgainAndTheLastFewAreKept() {
        let refusals = RefusalResponses(limits: .throttle(name: "like", window: .seconds(1)))
        let first = refusals.made(for: .throttled(retryAfter: .milliseconds(300))).answer
        // 0.3 s and 0.9 s both answer Retry-After: 1.
        #expect(refusals.made(for: .throttled(retryAfter: .milliseconds(900))).answer == first)
        let later = refusals.made(for: .throttled(retryAfter: .milliseconds(1_100))).answer
        #expect(later.fields[.retryAfter] == "2")
        #expect(first.fields[.retryAfter] == "1")
        #expect(RefusalResponses.Shape(.throttled(retryAfter: .milliseconds(300)))
            == RefusalResponses.Shape(.throttled(retryAfter: .milliseconds(1_000))))
        #expect(RefusalResponses.Shape(.throttled(retryAfter: .milliseconds(1_000)))
            != RefusalResponses.Shape(.throttled(retryAfter: .milliseconds(1_001))))
        #expect(RefusalResponses.Shape(.cancelled(.shutdown)) == nil)
    }
}
#endif
