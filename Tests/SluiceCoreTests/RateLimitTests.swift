import SluiceCore
import PropertyBased
import Testing

@Suite struct RateLimitTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var number: Int
        var at: Int64  // ms
        var quantity: Int
        var remaining: Int
        var resetAfter: Duration
        var retryAfter: Duration?
        var limited: Bool
        var testDescription: String { "case \(number)" }
    }

    /// redis-cell's `it_rate_limits` table (limit 5 = burst 4, 1 per second), in order.
    static let redisCellCases: [Case] = [
        Case(number: 0, at: 0, quantity: 6, remaining: 5, resetAfter: .zero, retryAfter: nil, limited: true),
        Case(number: 1, at: 0, quantity: 1, remaining: 4, resetAfter: .seconds(1), retryAfter: nil, limited: false),
        Case(number: 2, at: 0, quantity: 1, remaining: 3, resetAfter: .seconds(2), retryAfter: nil, limited: false),
        Case(number: 3, at: 0, quantity: 1, remaining: 2, resetAfter: .seconds(3), retryAfter: nil, limited: false),
        Case(number: 4, at: 0, quantity: 1, remaining: 1, resetAfter: .seconds(4), retryAfter: nil, limited: false),
        Case(number: 5, at: 0, quantity: 1, remaining: 0, resetAfter: .seconds(5), retryAfter: nil, limited: false),
        Case(number: 6, at: 0, quantity: 1, remaining: 0, resetAfter: .seconds(5), retryAfter: .seconds(1), limited: true),
        Case(number: 7, at: 3000, quantity: 1, remaining: 2, resetAfter: .milliseconds(3000), retryAfter: nil, limited: false),
        Case(number: 8, at: 3100, quantity: 1, remaining: 1, resetAfter: .milliseconds(3900), retryAfter: nil, limited: false),
        Case(number: 9, at: 4000, quantity: 1, remaining: 1, resetAfter: .milliseconds(4000), retryAfter: nil, limited: false),
        Case(number: 10, at: 8000, quantity: 1, remaining: 4, resetAfter: .milliseconds(1000), retryAfter: nil, limited: false),
        Case(number: 11, at: 9500, quantity: 1, remaining: 4, resetAfter: .milliseconds(1000), retryAfter: nil, limited: false),
        Case(number: 12, at: 9500, quantity: 0, remaining: 4, resetAfter: .seconds(1), retryAfter: nil, limited: false),
        Case(number: 13, at: 9500, quantity: 2, remaining: 2, resetAfter: .seconds(3), retryAfter: nil, limited: false),
        Case(number: 14, at: 9500, quantity: 5, remaining: 2, resetAfter: .seconds(3), retryAfter: .seconds(3), limited: true),
    ]

    @Test func redisCellTable() throws {
        var limiter = RateLimit(options: try RateLimitOptions(count: 1, per: .seconds(1), burst: 4))
        let start: Int64 = 1_000_000  // an arbitrary origin
        for c in Self.redisCellCases {
            let d = limiter.check(now: .ms(start + c.at), quantity: c.quantity)
            #expect(d.allowed == !c.limited, "case \(c.number)")
            #expect(d.limit == 5, "case \(c.number)")
            #expect(d.remaining == c.remaining, "case \(c.number)")
            #expect(d.resetAfter == c.resetAfter, "case \(c.number)")
            #expect(d.retryAfter == c.retryAfter, "case \(c.number)")
        }
    }

    /// Sustained rate after the burst: exactly one per emission interval.
    @Test func sustainedRate() throws {
        var limiter = RateLimit(options: try RateLimitOptions(count: 10, per: .seconds(1), burst: 0))
        #expect(limiter.check(now: .ms(0)).allowed)
        #expect(!limiter.check(now: .ms(99)).allowed)
        #expect(limiter.check(now: .ms(99)).retryAfter == .milliseconds(1))
        #expect(limiter.check(now: .ms(100)).allowed)
        var allowed = 0
        for t in stride(from: Int64(101), through: 1_100, by: 1) where limiter.check(now: .ms(t)).allowed {
            allowed += 1
        }
        #expect(allowed == 10)  // at 200, 300, …, 1100
    }

    /// redis-cell compares in whole seconds and lets a request through up to 1 s early; this does not.
    @Test func subSecondPrecision() throws {
        var limiter = RateLimit(options: try RateLimitOptions(count: 1, per: .seconds(1), burst: 0))
        #expect(limiter.check(now: .ms(0)).allowed)
        let early = limiter.check(now: .ms(500))
        #expect(!early.allowed)
        #expect(early.retryAfter == .milliseconds(500))
        #expect(early.resetAfter == .milliseconds(500))
    }

    @Test func idleWhenFullyReplenished() throws {
        let options = try RateLimitOptions(count: 1, per: .seconds(1), burst: 2)
        var state = RateLimitState()
        #expect(state.isIdle(at: .zero))
        _ = state.check(now: .ms(0), options: options)
        _ = state.check(now: .ms(0), options: options)
        #expect(!state.isIdle(at: .ms(1_999)))
        #expect(state.isIdle(at: .ms(2_000)))
        #expect(MemoryLayout<RateLimitState>.size == 8)
    }

    /// 100 per second with a burst of 20: 21 back to back, then one per 10 ms.
    @Test func aBurstOfTwentyAllowsTwentyOneBackToBack() throws {
        var limiter = RateLimit(options: try RateLimitOptions(count: 100, per: .seconds(1), burst: 20))
        var allowed = 0
        for _ in 0..<100 where limiter.check(now: .ms(0)).allowed { allowed += 1 }
        #expect(allowed == 21)
        #expect(limiter.check(now: .ms(10)).allowed)
        #expect(!limiter.check(now: .ms(10)).allowed)
    }
}

@Suite struct RateLimitOptionsTests {
    /// A burst whose `burst + 1` overflows is refused, not a trap (found by fuzz-ratelimit).
    @Test func theLargestBurstIsRefusedNotATrap() {
        #expect(throws: SluiceError.self) {
            try RateLimitOptions(count: 1, per: .seconds(1), burst: .max)
        }
    }

    /// A window so long that arrival times would saturate is refused: saturated, the arrival
    /// time stops advancing and every event would be admitted (found by fuzz-ratelimit).
    @Test func aWindowTooLongToCountIsRefused() throws {
        let year = Int64(365 * 24 * 3600)
        #expect(throws: SluiceError.self) {
            try RateLimitOptions(count: 1, per: .seconds(100 * year), burst: 1)
        }
        // 60 years of window is within range, and one event still spends it.
        let options = try RateLimitOptions(count: 1, per: .seconds(20 * year), burst: 1)
        var state = RateLimitState()
        #expect(state.check(now: .ms(0), options: options).allowed)
        #expect(state.check(now: .ms(0), options: options).allowed)
        #expect(!state.check(now: .ms(0), options: options).allowed)
    }
}

@Suite struct RateLimitRefundTests {
    /// A refund undoes an allowed check exactly: every later decision is the one the key would
    /// have got had the check never happened.
    @Test func aRefundUndoesAnAllowedCheck() async {
        let ops = zip(Gen.int(in: 0...400), Gen.int(in: 1...3), Gen.bool).array(of: 1...40)
        await propertyCheck(count: 300, input: ops) { ops in
            let options = try! RateLimitOptions(count: 10, per: .seconds(1), burst: 3)
            var real = RateLimitState()
            var model = RateLimitState()
            var t: Int64 = 0
            for (gap, quantity, refund) in ops {
                t += Int64(gap)
                let now = Instant(milliseconds: t)
                let decision = real.check(now: now, options: options, quantity: quantity)
                if decision.allowed && refund {
                    real.refund(quantity: quantity, now: now, options: options)
                } else {
                    #expect(model.check(now: now, options: options, quantity: quantity) == decision)
                }
                // Both agree on what a probe of one unit would get now.
                var probeReal = real
                var probeModel = model
                #expect(probeReal.check(now: now, options: options, quantity: 1) == probeModel.check(now: now, options: options, quantity: 1))
            }
        }
    }
}
