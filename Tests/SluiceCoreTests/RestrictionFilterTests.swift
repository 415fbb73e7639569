@testable import SluiceCore
import Testing

/// Tests of ``RestrictionFilter``. Every hash comes from a fixed-seed `SplitMix64` (never
/// `hashValue`), and every instant is explicit, so that each run replays the same filter.
@Suite struct RestrictionFilterTests {
    /// A horizon of 256 s: one tick is exactly one second.
    static let secondTicks = Duration.seconds(256)

    /// The instant of `tick` seconds, for filters with ``secondTicks``.
    static func second(_ tick: Int64) -> Instant { Instant(nanoseconds: tick * 1_000_000_000) }

    @Test func rejectsInvalidOptions() throws {
        for bytes in [-1, 0, 15] {
            #expect(throws: SluiceError.self) { _ = try RestrictionFilter(bytes: bytes, horizon: .seconds(1)) }
        }
        for horizon in [Duration.zero, .seconds(-1), .nanoseconds(-1)] {
            #expect(throws: SluiceError.self) { _ = try RestrictionFilter(bytes: 1024, horizon: horizon) }
        }
        do {
            _ = try RestrictionFilter(bytes: 8, horizon: .seconds(1))
            Issue.record("8 bytes were accepted")
        } catch {
            #expect(error.code == .invalidOption)
        }
        let smallest = try RestrictionFilter(bytes: 16, horizon: .nanoseconds(1))
        #expect(smallest.bucketCount == 1 && smallest.capacity == 4 && smallest.byteCount == 16)
        #expect(smallest.resolution == .nanoseconds(1))
        let odd = try RestrictionFilter(bytes: 100, horizon: .seconds(1))
        #expect(odd.bucketCount == 6 && odd.capacity == 24 && odd.byteCount == 96)
        #expect(odd.fill == 0 && odd.overflows == 0)
        // ⌈1 s / 256⌉ = 3,906,250 ns exactly; ⌈1 ms / 256⌉ rounds up.
        #expect(odd.resolution == .nanoseconds(3_906_250))
        #expect(try RestrictionFilter(bytes: 16, horizon: .milliseconds(1)).resolution == .nanoseconds(3_907))
    }

    /// `alternate` maps either bucket of a fingerprint to the other, for bucket counts that are
    /// not powers of two (and for those that are), and stays in range.
    @Test(arguments: [1, 2, 3, 5, 6, 7, 10, 97, 1_000, 4_096, 6_151, 49_152, 65_521])
    func alternateBucketIsAnInvolution(bucketCount: Int) throws {
        let filter = try RestrictionFilter(bytes: bucketCount * 16 + 15, horizon: .seconds(1))
        #expect(filter.bucketCount == bucketCount)
        var random = SplitMix64(seed: UInt64(bucketCount))
        for _ in 0..<5_000 {
            let (fingerprint, first) = filter.locate(random.next())
            #expect(fingerprint >= 1 && fingerprint < 1 << 20)
            #expect(first >= 0 && first < bucketCount)
            let second = filter.alternate(first, fingerprint: fingerprint)
            #expect(second >= 0 && second < bucketCount)
            #expect(filter.alternate(second, fingerprint: fingerprint) == first)
            // Any bucket, not only a key's first one.
            let other = Int(random.next() % UInt64(bucketCount))
            #expect(filter.alternate(filter.alternate(other, fingerprint: fingerprint), fingerprint: fingerprint) == other)
        }
    }

    /// A key's answer is never `nil` and never earlier than its real until while that until is
    /// in the future, whatever the load (kicks, overflows), the purge cadence (regular, lagging,
    /// absent) and the time steps (small, across many horizons). Checked against a model that
    /// remembers every key exactly.
    @Test(arguments: [
        (horizon: Duration.seconds(1), bytes: 16 * 257),
        (horizon: Duration.nanoseconds(100), bytes: 16 * 61),  // ticks of 1 ns
        (horizon: Duration.milliseconds(7), bytes: 16 * 1_000),
        (horizon: Duration.seconds(256), bytes: 16 * 3),
    ])
    func rememberedKeysAreNeverUnderstated(horizon: Duration, bytes: Int) async throws {
        var filter = try RestrictionFilter(bytes: bytes, horizon: horizon)
        let horizonNanoseconds = horizon.nanosecondsClamped
        var random = SplitMix64(seed: 0xF11E_0001 ^ UInt64(bytes))
        // A pool of keys twice the filter's capacity, so that keys recur, buckets fill, kicks
        // run and, at the peaks, entries overflow.
        let keys = (0..<2 * filter.capacity + 8).map { _ in random.next() }
        // Untils last half a horizon on average and a step is about 1/100 of one: about
        // 50 × `perStep` keys are live at a time (88 % of the capacity), twice that at the peaks.
        let perStep = Double(filter.capacity) * 0.88 / 50
        var model: [UInt64: Int64] = [:]
        var now: Int64 = -5 * horizonNanoseconds  // the timeline may start before its origin
        var checked = 0
        var checkedWithoutOverflow = 0  // answered before any bucket was marked

        func check() {
            let overflowing = filter.overflows > 0
            for (hash, until) in model where until > now {
                let answer = filter.restrictedUntil(hash: hash, now: Instant(nanoseconds: now))
                #expect(answer.map { $0.nanoseconds >= until } == true, "until \(until) now \(now)")
                checked += 1
                if !overflowing { checkedWithoutOverflow += 1 }
            }
        }

        for step in 0..<3_000 {
            // Mostly small steps; sometimes a long silence, up to several thousand ticks.
            switch random.next() % 1_000 {
            case 0: now += horizonNanoseconds * Int64(1 + random.next() % 40)
            case 1..<50: now += Int64(random.next() % UInt64(horizonNanoseconds))
            default: now += Int64(random.next() % UInt64(max(1, horizonNanoseconds / 50)))
            }
            let peak = (step / 250) % 4 == 3 ? 2 : 1  // a quarter of the time, over the capacity
            let mean = perStep * Double(peak)
            let count = Int(mean) + (Double(random.next() % 1_000) < 1_000 * (mean - mean.rounded(.down)) ? 1 : 0)
            for _ in 0..<count {
                let hash = keys[Int(random.next() % UInt64(keys.count))]
                let until = now + 1 + Int64(random.next() % UInt64(horizonNanoseconds))
                filter.remember(hash: hash, until: Instant(nanoseconds: until), now: Instant(nanoseconds: now))
                model[hash] = max(model[hash] ?? .min, until)
            }
            // Some answers are checked at every step, since the query is what must hold.
            let probe = keys[Int(random.next() % UInt64(keys.count))]
            let answer = filter.restrictedUntil(hash: probe, now: Instant(nanoseconds: now))
            if let until = model[probe], until > now {
                #expect(answer.map { $0.nanoseconds >= until } == true)
            }
            if let answer { #expect(answer.nanoseconds > now) }
            // A purge that keeps up in the first third, lags in the second, is absent in the last.
            if step < 1_000 {
                if step % 4 == 0 { filter.purge(now: Instant(nanoseconds: now), maxBuckets: 8) }
            } else if step < 2_000 {
                if step % 97 == 0 { filter.purge(now: Instant(nanoseconds: now), maxBuckets: 1) }
            }
            if step % 100 == 0 {
                check()
                // Long and synchronous: give the other tests' tasks the thread now and then.
                await Task.yield()
            }
            #expect(filter.occupied >= 0 && filter.occupied <= filter.capacity)
        }
        check()
        #expect(checkedWithoutOverflow > 10)
        print("RestrictionFilter property (\(horizon), \(filter.byteCount) B): \(checked) answers checked "
              + "(\(checkedWithoutOverflow) without an overflow), "
              + "\(filter.overflows) overflows, fill \(filter.fill)")
    }

    /// Expired entries answer `nil` and their slots take new keys without an overflow; the
    /// counters follow.
    @Test func expiredEntriesAnswerNilAndAreReused() throws {
        var filter = try RestrictionFilter(bytes: 16, horizon: Self.secondTicks)  // one bucket
        var random = SplitMix64(seed: 7)
        let old = (0..<4).map { _ in random.next() }
        for (n, hash) in old.enumerated() {
            filter.remember(hash: hash, until: Self.second(10 + Int64(n)), now: Self.second(0))
        }
        #expect(filter.occupied == 4 && filter.fill == 1)
        for (n, hash) in old.enumerated() {
            #expect(filter.restrictedUntil(hash: hash, now: Self.second(9)) == Self.second(10 + Int64(n)))
        }
        // Nothing is remembered for an until that has passed.
        filter.remember(hash: random.next(), until: Self.second(0), now: Self.second(0))
        #expect(filter.occupied == 4 && filter.overflows == 0)

        // At 13 s the first three have expired; the fourth (until 13 s) too.
        for hash in old { #expect(filter.restrictedUntil(hash: hash, now: Self.second(13)) == nil) }
        let new = (0..<4).map { _ in random.next() }
        for hash in new { filter.remember(hash: hash, until: Self.second(40), now: Self.second(13)) }
        #expect(filter.overflows == 0)
        #expect(filter.occupied == 4)
        for hash in new { #expect(filter.restrictedUntil(hash: hash, now: Self.second(39)) == Self.second(40)) }
        for hash in old { #expect(filter.restrictedUntil(hash: hash, now: Self.second(39)) == nil) }

        // A purge clears expired entries and counts them.
        #expect(filter.purge(now: Self.second(39), maxBuckets: 1) == 0)
        #expect(filter.purge(now: Self.second(40), maxBuckets: 1) == 4)
        #expect(filter.occupied == 0 && filter.fill == 0)
    }

    /// Untils are rounded up to a tick, never down, and the same key keeps its later until.
    @Test func untilsRoundUpAndKeepTheLater() throws {
        var filter = try RestrictionFilter(bytes: 1_024, horizon: .seconds(1))
        let tick = filter.resolution.nanosecondsClamped  // 3,906,250 ns
        let now = Instant(nanoseconds: 10 * tick + 5)
        filter.remember(hash: 42, until: Instant(nanoseconds: 20 * tick + 1), now: now)
        #expect(filter.restrictedUntil(hash: 42, now: now) == Instant(nanoseconds: 21 * tick))
        filter.remember(hash: 42, until: Instant(nanoseconds: 15 * tick), now: now)  // earlier: kept later
        #expect(filter.restrictedUntil(hash: 42, now: now) == Instant(nanoseconds: 21 * tick))
        filter.remember(hash: 42, until: Instant(nanoseconds: 30 * tick), now: now)  // later: taken
        #expect(filter.restrictedUntil(hash: 42, now: now) == Instant(nanoseconds: 30 * tick))
        #expect(filter.occupied == 1)
        // The full horizon, from a `now` in the middle of a tick.
        filter.remember(hash: 43, until: now + .seconds(1), now: now)
        let answer = try #require(filter.restrictedUntil(hash: 43, now: now))
        #expect(answer >= now + .seconds(1) && answer < now + .seconds(1) + .nanoseconds(tick))
        // Live until the rounded until, then gone.
        #expect(filter.restrictedUntil(hash: 42, now: Instant(nanoseconds: 30 * tick - 1)) != nil)
        #expect(filter.restrictedUntil(hash: 42, now: Instant(nanoseconds: 30 * tick)) == nil)
    }

    /// Whether an entry stored with until tick `untilTick` would read as live at `nowTick` if
    /// nothing had cleared it (the aliasing the catch-up purge prevents).
    static func wouldAlias(untilTick: Int64, nowTick: Int64) -> Bool {
        let distance = (untilTick - nowTick) & 0xFFF
        return distance >= 1 && distance <= 258
    }

    /// After a long silence (no call at all), an old entry does not come back, though its tick,
    /// read modulo 4096, would look live again: the filter knows nothing stored can outlive
    /// 258 ticks after the last call.
    @Test(arguments: [4_000, 4_096, 4_200, 5_000, 8_242, 12_388, 1_000_000] as [Int64])
    func anOldEntryDoesNotComeBackAfterASilence(jump: Int64) throws {
        var filter = try RestrictionFilter(bytes: 16 * 101, horizon: Self.secondTicks)
        let hash: UInt64 = 0xDEAD_BEEF_0BAD_F00D
        // Written so that the jump lands where its tick would alias (for the jumps that can).
        let start: Int64 = 1_000
        let aliasing = (start + 1...start + 258).first { Self.wouldAlias(untilTick: $0, nowTick: start + jump) }
        let untilTick = aliasing ?? start + 200
        filter.remember(hash: hash, until: Self.second(untilTick), now: Self.second(start))
        #expect(filter.restrictedUntil(hash: hash, now: Self.second(start)) == Self.second(untilTick))
        let later = Self.second(start + jump)
        #expect(filter.restrictedUntil(hash: hash, now: later) == nil)  // a query alone
        filter.remember(hash: 1, until: later + .seconds(10), now: later)  // the catch-up empties
        #expect(filter.restrictedUntil(hash: hash, now: later) == nil)
        #expect(filter.occupied == 1)
        #expect(filter.restrictedUntil(hash: 1, now: later) == later + .seconds(10))
    }

    /// Calls keep coming, a few ticks apart, but nobody purges: the filter finishes its overdue
    /// pass on its own, so no entry comes back as the ticks wrap around, many times over.
    @Test func anOldEntryDoesNotComeBackWithoutPurges() throws {
        var filter = try RestrictionFilter(bytes: 16 * 997, horizon: Self.secondTicks)
        var random = SplitMix64(seed: 99)
        let old = (0..<2_000).map { _ in random.next() }
        for (n, hash) in old.enumerated() {
            filter.remember(hash: hash, until: Self.second(1 + Int64(n % 258)), now: Self.second(0))
        }
        let oldSet = Set(old)
        var live: [UInt64: Int64] = [:]
        var cameBack = 0
        var tick: Int64 = 0
        while tick < 5 * 4_096 {
            tick += 1 + Int64(random.next() % 200)  // always under 258: no emptying
            let now = Self.second(tick)
            for (n, hash) in old.enumerated() {
                let answer = filter.restrictedUntil(hash: hash, now: now)
                if tick < 1 + Int64(n % 258) {
                    #expect(answer.map { $0 >= Self.second(1 + Int64(n % 258)) } == true)
                } else if answer != nil {
                    cameBack += 1  // expired, yet answered
                }
            }
            let hash = random.next()
            let until = tick + 1 + Int64(random.next() % 256)
            filter.remember(hash: hash, until: Self.second(until), now: now)
            live[hash] = until
            for (hash, until) in live where until > tick && !oldSet.contains(hash) {
                #expect(filter.restrictedUntil(hash: hash, now: now).map { $0 >= Self.second(until) } == true)
            }
            live = live.filter { $0.value > tick }
        }
        #expect(cameBack == 0)
        // The old entries were cleared, not just ignored.
        filter.purge(now: Self.second(tick), maxBuckets: filter.bucketCount)
        #expect(filter.occupied == live.count)
    }

    /// The worst case for the catch-up: an entry expires just after the purge has passed its
    /// bucket, and nobody purges afterwards (calls come every 100 ticks and visit no bucket), so
    /// its bucket is reached only when the next pass is forced to finish. That must happen before
    /// the entry's tick, read modulo 4096, looks live again (3,838 ticks after it expired). A
    /// deadline of 2,048 ticks per pass would be too late here (the second forced finish would
    /// come at tick 4,200); 1,024 clears it at tick 2,200.
    @Test func theWorstPlacedEntryIsClearedBeforeItComesBack() throws {
        var filter = try RestrictionFilter(bytes: 16 * 8, horizon: Self.secondTicks)
        var random = SplitMix64(seed: 11)
        var hash = random.next()
        while filter.locate(hash).bucket != 0 { hash = random.next() }  // the first bucket a pass visits
        filter.purge(now: Self.second(0), maxBuckets: 1)  // visits bucket 0; the pass moves on
        filter.remember(hash: hash, until: Self.second(1), now: Self.second(0))
        #expect(filter.restrictedUntil(hash: hash, now: Self.second(0)) == Self.second(1))
        var aliasing = 0
        for tick in stride(from: Int64(100), through: 3 * 4_096, by: 100) {
            filter.purge(now: Self.second(tick), maxBuckets: 0)  // the catch-up checks only
            #expect(filter.restrictedUntil(hash: hash, now: Self.second(tick)) == nil, "tick \(tick)")
            if Self.wouldAlias(untilTick: 1, nowTick: tick) { aliasing += 1 }
        }
        #expect(aliasing > 0)  // ticks at which an uncleared entry would have come back
        #expect(filter.occupied == 0)
    }

    /// A one-bucket filter given more live keys than it has entries stores what it can and marks
    /// its bucket: every key maps to it, so every key, remembered or not, is answered until the
    /// latest until it lost passes.
    @Test func anOverflowMarksTheBucket() throws {
        var filter = try RestrictionFilter(bytes: 16, horizon: Self.secondTicks)
        var random = SplitMix64(seed: 3)
        let keys = (0..<12).map { _ in random.next() }
        for (n, hash) in keys.enumerated() {
            filter.remember(hash: hash, until: Self.second(50 + Int64(n)), now: Self.second(0))
        }
        #expect(filter.overflows == 8)
        #expect(filter.occupied == 4 && filter.fill == 1)
        for (n, hash) in keys.enumerated() {
            let answer = try #require(filter.restrictedUntil(hash: hash, now: Self.second(49)))
            #expect(answer >= Self.second(50 + Int64(n)))
        }
        for _ in 0..<1_000 {
            let answer = filter.restrictedUntil(hash: random.next(), now: Self.second(49))
            #expect(answer.map { $0 >= Self.second(50) && $0 <= Self.second(62) } == true)
        }
        // Once everything has passed, nothing is answered.
        #expect(filter.restrictedUntil(hash: keys[0], now: Self.second(62)) == nil)
        #expect(filter.restrictedUntil(hash: random.next(), now: Self.second(62)) == nil)
    }

    /// A lookup tells an answer from the key's own entry from one an overflow marker gives alone:
    /// without an overflow every remembered key answers by its own entry; past its capacity the
    /// never-seen keys the filter answers for are answered by markers (own-fingerprint false
    /// positives are a few in a million), and most remembered keys still by their own entry.
    @Test func aLookupSaysWhenOnlyAMarkerAnswers() throws {
        let now = Self.second(1_000)
        var random = SplitMix64(seed: 0x0C_0FFE)

        var fitting = try RestrictionFilter(bytes: 196_608, horizon: Self.secondTicks)
        let fittingKeys = Self.fill(&fitting, count: 40_000, random: &random, now: now)
        #expect(fitting.overflows == 0)
        for hash in fittingKeys {
            let found = try #require(fitting.lookup(hash: hash, now: now))
            #expect(!found.byMarkerOnly && found.until == fitting.restrictedUntil(hash: hash, now: now))
        }

        var full = try RestrictionFilter(bytes: 196_608, horizon: Self.secondTicks)
        let keys = Self.fill(&full, count: 60_000, random: &random, now: now)
        #expect(full.overflows > 0)
        let ownAnswers = keys.filter { full.lookup(hash: $0, now: now)?.byMarkerOnly == false }.count
        #expect(ownAnswers >= full.capacity * 3 / 4, "\(ownAnswers) of \(keys.count)")  // markers took some slots
        var answered = 0
        var byMarkers = 0
        for _ in 0..<50_000 {
            guard let found = full.lookup(hash: random.next(), now: now) else { continue }
            answered += 1
            if found.byMarkerOnly { byMarkers += 1 }
            #expect(found.until > now)
        }
        #expect(answered > 0 && byMarkers >= answered - 2, "\(byMarkers) of \(answered) by markers")
        // Nothing is answered once every restriction has passed.
        #expect(full.lookup(hash: keys[0], now: now + .seconds(257)) == nil)
    }

    /// Fills `filter` with `count` random keys, all restricted until `now + horizon`; returns
    /// their hashes.
    static func fill(_ filter: inout RestrictionFilter, count: Int, random: inout SplitMix64, now: Instant) -> [UInt64] {
        (0..<count).map { _ in
            let hash = random.next()
            filter.remember(hash: hash, until: now + .seconds(255), now: now)
            return hash
        }
    }

    /// The share of `queries` never-remembered random keys the filter answers for.
    static func falsePositiveRate(_ filter: RestrictionFilter, queries: Int, random: inout SplitMix64, now: Instant) -> Double {
        var positives = 0
        for _ in 0..<queries where filter.restrictedUntil(hash: random.next(), now: now) != nil {
            positives += 1
        }
        return Double(positives) / Double(queries)
    }

    /// At 90 % of its capacity (a bucket count that is not a power of two), the filter takes
    /// every key without an overflow, answers each of them, and answers fewer than 0.1 % of
    /// never-remembered keys (about 8 × 0.9 / 2²⁰ ≈ 7 in a million is expected).
    @Test func falsePositiveRateAtNinetyPercent() throws {
        var filter = try RestrictionFilter(bytes: 16 * 10_007, horizon: Self.secondTicks)
        var random = SplitMix64(seed: 0x0F_0F_0F)
        let now = Self.second(1_000)
        let keys = Self.fill(&filter, count: filter.capacity * 9 / 10, random: &random, now: now)
        #expect(filter.overflows == 0)
        #expect(abs(filter.fill - 0.9) < 0.001)
        for hash in keys { #expect(filter.restrictedUntil(hash: hash, now: now) != nil) }
        let rate = Self.falsePositiveRate(filter, queries: 200_000, random: &random, now: now)
        print("RestrictionFilter false positives at fill \(filter.fill) (\(filter.capacity) entries): \(rate)")
        #expect(rate < 0.001)
    }

    /// A quarter of the budget a 1 MiB limiter gives its filter: 196,608 bytes (12,288 buckets,
    /// 49,152 entries). 50,000 live keys are more than it has entries: it overflows, each overflow
    /// marking a bucket, and answers every key it was given and the never-seen keys that map to a
    /// marked bucket (the safe side), not every key. At 90 % of its capacity it does not overflow.
    @Test func loadIntoAQuarterOfThreeQuartersOfAMebibyte() async throws {
        let now = Self.second(1_000)
        var random = SplitMix64(seed: 0xA11_0CA7E)

        var full = try RestrictionFilter(bytes: 196_608, horizon: Self.secondTicks)
        #expect(full.bucketCount == 12_288 && full.capacity == 49_152)
        let keys = Self.fill(&full, count: 50_000, random: &random, now: now)
        for hash in keys { #expect(full.restrictedUntil(hash: hash, now: now) != nil) }
        let fullRate = Self.falsePositiveRate(full, queries: 50_000, random: &random, now: now)
        print("RestrictionFilter 50,000 keys into 196,608 bytes: fill \(full.fill), \(full.overflows) overflows, "
              + "false positives \(fullRate)")
        // About 2 × (marked buckets) / 12,288 of never-seen keys.
        #expect(full.overflows > 0 && fullRate > 0 && fullRate < 0.5)

        await Task.yield()
        var fitting = try RestrictionFilter(bytes: 196_608, horizon: Self.secondTicks)
        let fittingKeys = Self.fill(&fitting, count: 44_236, random: &random, now: now)
        for hash in fittingKeys { #expect(fitting.restrictedUntil(hash: hash, now: now) != nil) }
        let fittingRate = Self.falsePositiveRate(fitting, queries: 50_000, random: &random, now: now)
        print("RestrictionFilter 44,236 keys into 196,608 bytes: fill \(fitting.fill), \(fitting.overflows) overflows, "
              + "false positives \(fittingRate)")
        #expect(fitting.overflows == 0 && fittingRate < 0.001)

        await Task.yield()
        // Highest load without an overflow, for the record.
        var probe = try RestrictionFilter(bytes: 196_608, horizon: Self.secondTicks)
        var stored = 0
        while probe.overflows == 0 {
            probe.remember(hash: random.next(), until: now + .seconds(255), now: now)
            stored += 1
        }
        print("RestrictionFilter 196,608 bytes: first overflow at key \(stored) (load \(Double(stored) / Double(probe.capacity)))")
    }
}
