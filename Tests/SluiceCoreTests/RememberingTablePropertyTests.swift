import PropertyBased
import SluiceCore
import Testing

/// Tables that remember the live keys they evict, against the unbounded exact limiter: random
/// traces over a key space far larger than the table. The exact limiter is kept on the history
/// the table admitted (an event the table refused spends nothing in either), so at every step
/// both decide the same event from the same history.
///
/// The error may go one way only: the table never admits an event the exact limiter refuses. It
/// may refuse one the exact limiter admits (a key the summary rounds up, or a never-seen key it
/// mistakes for a remembered one); how often is reported.
@Suite struct RememberingTablePropertyTests {
    @Test func aRememberingRateTableNeverAdmitsWhatTheExactLimiterRefuses() async {
        // (key, gap in ms, quantity)
        let steps = zip(Gen.int(in: 0...499), Gen.int(in: 0...40), Gen.int(in: 1...2)).array(of: 200...600)
        let wrong = Tally()
        await propertyCheck(count: 200, input: Gen.int(in: 1...5), Gen.int(in: 0...3), steps) { count, burst, steps in
            let options = try RateLimitOptions(count: count, per: .seconds(2), burst: burst)
            // About 20 exact keys; the summary takes the rest of the budget.
            var table = try RateLimitTable<Int>(options: options, budget: .bytes(8 << 10))
            #expect(table.table.capacity < 40)
            var exact: [Int: RateLimitState] = [:]
            var t: Int64 = 0
            for (key, gap, quantity) in steps {
                t += Int64(gap) * 1_000_000
                let now = Instant(nanoseconds: t)
                var peek = exact[key] ?? RateLimitState()
                let exactAllows = peek.check(now: now, options: options, quantity: quantity).allowed
                let allowed = try table.check(key: key, now: now, quantity: quantity).allowed
                if allowed {
                    #expect(exactAllows, "key \(key) admitted at \(t / 1_000_000) ms; the exact limiter refuses it")
                    exact[key] = peek
                } else if exactAllows {
                    wrong.add(1)
                }
                wrong.count(1)
                if key % 97 == 0 { table.sweepKeepingUp(now: now, minimumEntries: 8) }
            }
            wrong.evict(table.stats.evicted)
        }
        #expect(wrong.evictions > 1_000)
        print("remembering rate table: \(wrong.refusals) of \(wrong.decisions) decisions refused where the exact limiter admits")
    }

    @Test func aRememberingThrottleTableNeverRunsWhatTheExactThrottleDrops() async {
        // (key, gap in ms)
        let steps = zip(Gen.int(in: 0...499), Gen.int(in: 0...40)).array(of: 200...600)
        let wrong = Tally()
        await propertyCheck(count: 200, input: Gen.int(in: 50...3_000), steps) { interval, steps in
            let options = try ThrottleOptions(interval: .milliseconds(interval), whenFull: .remember)
            var table = try ThrottleTable<Int>(options: options, budget: .bytes(8 << 10))
            var exact: [Int: ThrottleState] = [:]
            var t: Int64 = 0
            for (n, (key, gap)) in steps.enumerated() {
                t += Int64(gap) * 1_000_000
                let now = Instant(nanoseconds: t)
                var peek = exact[key] ?? ThrottleState()
                let exactRuns = peek.event(EventToken(UInt64(n)), now: now, options: options) == .run
                let runs = try table.event(EventToken(UInt64(n)), key: key, now: now).decision == .run
                if runs {
                    #expect(exactRuns, "key \(key) ran at \(t / 1_000_000) ms; the exact throttle drops it")
                    exact[key] = peek
                } else if exactRuns {
                    wrong.add(1)
                }
                wrong.count(1)
                if key % 97 == 0 { table.sweepKeepingUp(now: now, minimumEntries: 8) }
            }
            wrong.evict(table.stats.evicted)
        }
        #expect(wrong.evictions > 1_000)
        print("remembering throttle table: \(wrong.refusals) of \(wrong.decisions) decisions dropped where the exact throttle runs")
    }

    /// The flood of the acceptance, in miniature: a key limited before a flood of unique
    /// keys is still limited after it; with the table that forgets, it passes again.
    @Test func aLimitedKeyStaysLimitedThroughAFloodOnlyWhenRemembered() throws {
        for whenFull in WhenTableFull.allCases {
            let options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 0, whenFull: whenFull)
            var table = try RateLimitTable<String>(options: options, budget: .bytes(1 << 20))
            var now = Instant.zero
            #expect(try table.check(key: "victim", now: now).allowed)
            #expect(try !table.check(key: "victim", now: now).allowed)
            var refusedFresh = 0
            var busy = 0
            for n in 0..<200_000 {
                now = Instant(nanoseconds: Int64(n) * 100_000)  // 10,000 keys a second
                do {
                    if try !table.check(key: "flood:\(n)", now: now).allowed { refusedFresh += 1 }
                } catch {
                    busy += 1
                }
                if n % 1_000 == 0 { table.sweepKeepingUp(now: now, minimumEntries: 64) }
            }
            let victimAllowed = try table.check(key: "victim", now: now).allowed
            switch whenFull {
            case .remember:
                #expect(!victimAllowed)
                #expect(refusedFresh <= 200)  // 0.1 %
                #expect(busy == 0)
                #expect(table.stats.summaryOverflows == 0)
                print("remember: \(refusedFresh) of 200,000 fresh keys refused, summary fill \(table.stats.summaryFill)")
            case .forget:
                #expect(victimAllowed)
                #expect(refusedFresh == 0)
            case .refuse:
                #expect(!victimAllowed)
                // Every new key the table had no room for (the victim holds one entry).
                #expect(busy == 200_000 - (table.table.capacity - 1))
            }
        }
    }
}

/// Counts shared by the runs of a property check.
final class Tally: @unchecked Sendable {
    // @unchecked Sendable: property checks run their cases one after another, on one task.
    private(set) var refusals = 0
    private(set) var decisions = 0
    private(set) var evictions = 0
    func evict(_ n: Int) { evictions += n }
    func add(_ n: Int) { refusals += n }
    func count(_ n: Int) { decisions += n }
}
