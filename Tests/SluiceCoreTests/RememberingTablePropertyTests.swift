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
        await propertyCheck(count: 50, input: Gen.int(in: 1...5), Gen.int(in: 0...3), steps) { count, burst, steps in
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
                // Busy (an overflowed summary cannot decide the key) refuses and spends nothing.
                let allowed: Bool
                do {
                    allowed = try table.check(key: key, now: now, quantity: quantity).allowed
                } catch let error as SluiceError where error.code == .tableBusy {
                    allowed = false
                }
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
        #expect(wrong.evictions > 250)
        print("remembering rate table: \(wrong.refusals) of \(wrong.decisions) decisions refused where the exact limiter admits")
    }

    @Test func aRememberingThrottleTableNeverRunsWhatTheExactThrottleDrops() async {
        // (key, gap in ms)
        let steps = zip(Gen.int(in: 0...499), Gen.int(in: 0...40)).array(of: 200...600)
        let wrong = Tally()
        await propertyCheck(count: 50, input: Gen.int(in: 50...3_000), steps) { interval, steps in
            let options = try ThrottleOptions(interval: .milliseconds(interval), whenFull: .remember)
            var table = try ThrottleTable<Int>(options: options, budget: .bytes(8 << 10))
            var exact: [Int: ThrottleState] = [:]
            var t: Int64 = 0
            for (n, (key, gap)) in steps.enumerated() {
                t += Int64(gap) * 1_000_000
                let now = Instant(nanoseconds: t)
                var peek = exact[key] ?? ThrottleState()
                let exactRuns = peek.event(EventToken(UInt64(n)), now: now, options: options) == .run
                let runs: Bool
                do {
                    runs = try table.event(EventToken(UInt64(n)), key: key, now: now).decision == .run
                } catch let error as SluiceError where error.code == .tableBusy {
                    runs = false
                }
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
        #expect(wrong.evictions > 250)
        print("remembering throttle table: \(wrong.refusals) of \(wrong.decisions) decisions dropped where the exact throttle runs")
    }

    /// A key limited before a flood of unique keys is still limited after it; with the table that
    /// forgets, it passes again; with the one that refuses, the flood's keys are refused.
    @Test func aLimitedKeyStaysLimitedThroughAFloodOnlyWhenRemembered() async throws {
        for whenFull in WhenTableFull.allCases {
            let options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 0, whenFull: whenFull)
            var table = try RateLimitTable<String>(options: options, budget: .bytes(48 << 10))
            var now = Instant.zero
            #expect(try table.check(key: "victim", now: now).allowed)
            #expect(try !table.check(key: "victim", now: now).allowed)
            var refusedFresh = 0
            var busy = 0
            for n in 0..<8_000 {
                now = Instant(nanoseconds: Int64(n) * 100_000)  // 10,000 keys a second
                do {
                    if try !table.check(key: "flood:\(n)", now: now).allowed { refusedFresh += 1 }
                } catch {
                    busy += 1
                }
                if n % 250 == 0 {
                    table.sweepKeepingUp(now: now, minimumEntries: 64)
                    await Task.yield()  // long and synchronous: let other tests run
                }
            }
            let victimAllowed = try table.check(key: "victim", now: now).allowed
            switch whenFull {
            case .remember:
                #expect(!victimAllowed)
                #expect(refusedFresh <= 8)  // 0.1 %
                #expect(busy == 0)
                #expect(table.stats.summaryOverflows == 0)
                print("remember: \(refusedFresh) of 8,000 fresh keys refused, summary fill \(table.stats.summaryFill)")
            case .forget:
                #expect(victimAllowed)
                #expect(refusedFresh == 0)
            case .refuse:
                #expect(!victimAllowed)
                // Every new key the table had no room for (the victim holds one entry).
                #expect(busy == 8_000 - (table.table.capacity - 1))
            }
        }
    }
}

extension RememberingTablePropertyTests {
    /// A flood past what the summary holds: the never-seen keys that only an overflow marker
    /// answers for are refused as busy (the summary cannot decide them), not limited, and leave
    /// no entry behind, so they ask again next time; the victim limited before the flood is
    /// still refused.
    @Test func aKeyOnlyAnOverflowMarkerAnswersForIsBusyNotLimited() async throws {
        let options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 0)
        var table = try RateLimitTable<String>(options: options, budget: .bytes(8 << 10))
        let now = Instant.zero
        #expect(try table.check(key: "victim", now: now).allowed)
        // Four times the keys the summary has entries for, each restricted for a minute.
        let flood = table.summary.filter.capacity * 4
        for n in 0..<flood {
            _ = try? table.check(key: "flood:\(n)", now: now)
            if n % 1_000 == 999 { await Task.yield() }  // long and synchronous: let other tests run
        }
        #expect(table.stats.summaryOverflows > 0)
        var busy = 0
        var limited = 0
        let refusalsBefore = table.stats.summaryRefusals
        for n in 0..<2_000 {
            let key = "never-seen:\(n)"
            do {
                if try !table.check(key: key, now: now).allowed { limited += 1 }
            } catch {
                #expect(error.code == .tableBusy)
                #expect(table.table.index(of: key) == nil, "\(key) was kept")
                busy += 1
            }
        }
        print("past its summary: \(busy) of 2,000 never-seen keys busy, \(limited) limited")
        #expect(busy > 0)
        #expect(limited <= 2)  // a key's own-fingerprint false positive: a few in a million
        #expect(table.stats.summaryRefusals - refusalsBefore >= busy)
        let victim = try? table.check(key: "victim", now: now)
        #expect(victim?.allowed != true)
        // Once every restriction has passed, the summary answers for no key: new keys pass.
        let later = now + .seconds(61)
        for n in 0..<100 { #expect(try table.check(key: "never-seen:\(n)", now: later).allowed) }
    }

    /// A key the overflowed summary cannot decide is refused before anything is evicted for it:
    /// the table holds the same keys afterwards, and no held event of another key is dropped.
    @Test func aBusyKeyEvictsNothing() async throws {
        let options = try ThrottleOptions(interval: .seconds(60), trailing: true, whenFull: .remember)
        var table = try ThrottleTable<String>(options: options, budget: .bytes(8 << 10))
        let now = Instant.zero
        // Each key runs once and holds a second event: every entry holds one.
        var dropped: Set<EventToken> = []
        var token: UInt64 = 0
        for n in 0..<(table.summary.filter.capacity * 4) {
            for _ in 0..<2 {
                token += 1
                if let decided = try? table.event(EventToken(token), key: "held:\(n)", now: now) {
                    dropped.formUnion(decided.evictedPending)
                }
            }
            if n % 1_000 == 999 { await Task.yield() }  // long and synchronous: let other tests run
        }
        #expect(table.stats.summaryOverflows > 0)
        var busy = 0
        for n in 0..<500 {
            let keys = table.table.keys
            let pending = table.table.keys.compactMap { table.state(of: $0)?.pending }
            token += 1
            do {
                dropped.formUnion(try table.event(EventToken(token), key: "never-seen:\(n)", now: now).evictedPending)
            } catch {
                busy += 1
                #expect(table.table.keys == keys)
                #expect(table.table.keys.compactMap { table.state(of: $0)?.pending } == pending)
            }
        }
        #expect(busy > 0)
    }

    /// A long key evicts several live short keys at once: each is remembered.
    @Test func everyKeyALongKeyEvictsIsRemembered() throws {
        let options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 0)
        var table = try RateLimitTable<String>(options: options, budget: .bytes(8 << 10))
        let now = Instant.zero
        var n = 0
        while table.table.count < table.table.capacity {
            #expect(try table.check(key: "s\(n)", now: now).allowed)
            n += 1
        }
        let long = "L" + String(repeating: "x", count: 600)
        #expect(try table.check(key: long, now: now).allowed)
        let gone = (0..<n).filter { table.table.index(of: "s\($0)") == nil }
        #expect(gone.count >= 2)
        for key in gone {
            #expect(try !table.check(key: "s\(key)", now: now + .seconds(1)).allowed, "s\(key) was evicted and forgotten")
        }
    }

    /// A table shared by loops is called with clocks a little apart (a plugin's limit chain): a
    /// restriction that ends between an earlier and a later reading is not lost, because the
    /// table decides on one clock that never goes back.
    @Test func aSlightlyEarlierNowLosesNoRestriction() throws {
        // E = 256 ms, tolerance 256 ms: horizon 512 ms, ticks of 2 ms.
        let options = try RateLimitOptions(count: 1, per: .milliseconds(256), burst: 0)
        var table = try RateLimitTable<String>(options: options, budget: .entries(1))
        let ms: (Int64) -> Instant = { Instant(nanoseconds: $0 * 1_000_000) }
        #expect(try table.check(key: "x", now: ms(743)).allowed)  // x's arrival time: 999 ms
        table.sweepKeepingUp(now: ms(1_000), minimumEntries: 0)  // one loop's sweep at 1,000 ms
        #expect(try table.check(key: "a", now: ms(998)).allowed)  // another's request at 998 ms
        // Decided at 1,000 ms, the table's clock: x's restriction ended at 999 ms.
        #expect(try table.check(key: "x", now: ms(998)).allowed)  // x's arrival time: 1,256 ms
        // A request read at 995 ms evicts x while its restriction runs: x stays refused.
        #expect(try table.check(key: "b", now: ms(995)).allowed)
        #expect(try !table.check(key: "x", now: ms(996)).allowed)
        #expect(table.stats.summaryRestored > 0)
    }

    /// Under more new keys than the summary holds, the table refuses some new keys, never lets
    /// a restricted one through, and (each overflow marking one bucket of the summary) does not
    /// refuse them all at once. The keys it refuses only for a marked bucket are busy, not
    /// limited: the summary cannot tell them from the keys it lost there.
    @Test(arguments: [MemoryBudget.entries(40), .bytes(32 << 10)])
    func aSummaryOverItsCapacityRefusesSomeNewKeysAsBusyNotAll(budget: MemoryBudget) async throws {
        let options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 0)
        var table = try RateLimitTable<String>(options: options, budget: budget)
        // 10 % more keys than the summary and the table hold, one new key a millisecond, all
        // within one window: the exact limiter admits every one.
        let count = (table.summary.filter.capacity + table.table.capacity) * 11 / 10
        var limited = 0
        var busy = 0
        for n in 0..<count {
            let now = Instant(nanoseconds: Int64(n) * 1_000_000)
            switch Result(catching: { () throws(SluiceError) in try table.check(key: "user:\(n)", now: now) }) {
            case .success(let decision): if !decision.allowed { limited += 1 }
            case .failure(let error): if error.code == .tableBusy { busy += 1 } else { throw error }
            }
            if n % 100 == 0 {
                table.sweepKeepingUp(now: now, minimumEntries: 64)
                await Task.yield()  // long and synchronous: let other tests run
            }
        }
        print("\(budget): \(busy) of \(count) new keys busy, \(limited) limited, \(table.stats.summaryOverflows) overflows")
        #expect(table.stats.summaryOverflows > 0)
        #expect(busy > 0 && busy + limited < count / 4)
        #expect(limited <= count / 1_000 + 1)  // own-fingerprint false positives: a few in a million
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
