import SluiceCore

/// A deliberately naive chain of limits: every stage decides on a copy of the state, and the
/// copies replace the state only when every stage admitted the request (all or nothing, by
/// construction). Rate stages are ``NaiveRateLimit``s (a history of allowed requests per key),
/// concurrency stages a count per key.
///
/// The reference of ``LimitChain``'s property test, which takes and then gives back each stage's
/// part when a later stage refuses.
public struct NaiveLimitChain {
    public enum Stage {
        case rate(options: RateLimitOptions, keys: [Int: NaiveRateLimit])
        case concurrency(limit: Int, inFlight: [Int: Int])
    }

    public var stages: [Stage]
    public var shadow: [Bool]

    public init(stages: [StageLimit], shadow: [Bool]) {
        self.stages = stages.map {
            switch $0 {
            case .rate(let options): .rate(options: options, keys: [:])
            case .concurrency(let limit): .concurrency(limit: limit, inFlight: [:])
            }
        }
        self.shadow = shadow
    }

    /// The verdicts up to the refusing stage, the refusing stage (nil when admitted), the shadow
    /// stages that would have refused, and the stages whose part the request took.
    public mutating func admit(keys: [Int], cost: Int, t: Int64) -> (
        verdicts: [StageVerdict], refusedBy: Int?, shadowRefusals: [Int], held: [Int]
    ) {
        var tentative = stages
        var verdicts: [StageVerdict] = []
        var shadowRefusals: [Int] = []
        var held: [Int] = []
        for index in tentative.indices {
            let verdict: StageVerdict
            switch tentative[index] {
            case .rate(let options, var limiters):
                var limiter = limiters[keys[index]] ?? Self.limiter(options)
                verdict = .rate(limiter.check(t: t, quantity: cost))
                limiters[keys[index]] = limiter
                tentative[index] = .rate(options: options, keys: limiters)
            case .concurrency(let limit, var inFlight):
                let current = inFlight[keys[index], default: 0]
                let allowed = current < limit
                if allowed { inFlight[keys[index]] = current + 1 }
                verdict = .concurrency(limit: limit, inFlight: allowed ? current + 1 : current, allowed: allowed)
                tentative[index] = .concurrency(limit: limit, inFlight: inFlight)
            }
            verdicts.append(verdict)
            if verdict.allowed {
                held.append(index)
            } else if shadow[index] {
                shadowRefusals.append(index)
            } else {
                return (verdicts, index, shadowRefusals, [])
            }
        }
        stages = tentative
        return (verdicts, nil, shadowRefusals, held)
    }

    /// A fresh limiter of `options`: emission `period / count`, tolerance `emission × limit`.
    static func limiter(_ options: RateLimitOptions) -> NaiveRateLimit {
        let emission = options.period.nanosecondsClamped / Int64(options.count)
        return NaiveRateLimit(emission: emission, tolerance: emission * Int64(options.limit), burst: options.burst)
    }

    /// An admitted request's execution ended: its concurrency slots are free.
    public mutating func release(held: [Int], keys: [Int]) {
        for index in held {
            guard case .concurrency(let limit, var inFlight) = stages[index] else { continue }
            inFlight[keys[index], default: 0] -= 1
            stages[index] = .concurrency(limit: limit, inFlight: inFlight)
        }
    }

    /// What stage `index` reports for `key` at `t`, changing nothing.
    public func peek(stage index: Int, key: Int, t: Int64) -> StageVerdict {
        switch stages[index] {
        case .rate(let options, let limiters):
            var limiter = limiters[key] ?? Self.limiter(options)
            return .rate(limiter.check(t: t, quantity: 0))
        case .concurrency(let limit, let inFlight):
            let current = inFlight[key, default: 0]
            return .concurrency(limit: limit, inFlight: current, allowed: current < limit)
        }
    }
}
