import SluiceCore
import Testing

@Suite("KeySlotPrefetcher")
struct KeySlotPrefetcherTests {
    /// A lookup with the prefetcher's hash finds what a plain lookup inserted, and the other way
    /// round: the two hashes are the same function.
    @Test func aLookupWithThePrefetchersHashIsAPlainLookup() throws {
        var table = try KeyTable<String, TallyState>(capacity: 4_096, whenFull: .evict)
        let prefetcher = table.slotPrefetcher
        for n in 0..<2_000 {
            let key = "key:\(n)"
            let hash = KeySlotPrefetcher.hash(key)
            prefetcher.prefetch(hash: hash)
            let slot = n.isMultiple(of: 2)
                ? try table.lookup(key, now: .zero, orInsert: TallyState())
                : try table.lookup(key, hash: hash, now: .zero, orInsert: TallyState())
            table[slot.index].count = n
        }
        for n in 0..<2_000 {
            let key = "key:\(n)"
            let found = n.isMultiple(of: 2)
                ? try table.lookup(key, hash: KeySlotPrefetcher.hash(key), now: .zero, orInsert: TallyState())
                : try table.lookup(key, now: .zero, orInsert: TallyState())
            #expect(!found.isNew)
            #expect(table[found.index].count == n)
        }
        #expect(table.count == 2_000)
    }

    /// The tables the gate decides with take the hash too, and decide as without it.
    @Test func throttleAndRateLimitTablesDecideTheSameWithTheHash() throws {
        var plain = try ThrottleTable<String>(options: try ThrottleOptions(interval: .seconds(1)), budget: .entries(64))
        var hashed = plain
        var plainLimit = try RateLimitTable<String>(options: try RateLimitOptions(count: 2, per: .seconds(1), burst: 1), budget: .entries(64))
        var hashedLimit = plainLimit
        for n in 0..<400 {
            let key = "k\(n % 37)"
            let now = Instant(nanoseconds: Int64(n) * 10_000_000)
            let hash = KeySlotPrefetcher.hash(key)
            hashed.table.slotPrefetcher.prefetch(hash: hash)
            #expect(try hashed.event(EventToken(UInt64(n)), key: key, hash: hash, now: now).decision
                == plain.event(EventToken(UInt64(n)), key: key, now: now).decision)
            #expect(try hashedLimit.check(key: key, hash: hash, now: now) == plainLimit.check(key: key, now: now))
        }
    }

    /// A prefetcher that outlives its table only hints at memory that is gone: harmless.
    @Test func aPrefetcherThatOutlivesItsTableIsHarmless() throws {
        var prefetcher: KeySlotPrefetcher?
        do {
            let table = try KeyTable<String, TallyState>(capacity: 1 << 16, whenFull: .evict)
            prefetcher = table.slotPrefetcher
        }
        let stale = try #require(prefetcher)
        for hash in stride(from: UInt32(0), to: UInt32.max - 65_537, by: 65_537) { stale.prefetch(hash: hash) }
    }
}
