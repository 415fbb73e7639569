import SluiceCore
import Testing

/// A state with an explicit expiry, for table tests.
struct Expiring: KeyedState, Hashable, Sendable {
    var value: Int
    var expiresAt: Int64 = .max
    func isIdle(at now: Instant) -> Bool { now.nanoseconds >= expiresAt }
}

@Suite struct KeyTableTests {
    @Test func insertFindUpdate() throws {
        var table = try KeyTable<String, Expiring>(capacity: 100, whenFull: .evict)
        for n in 0..<100 {
            let slot = try table.lookup("user:\(n)", now: .zero, orInsert: Expiring(value: n))
            #expect(slot.evicted.isEmpty)
        }
        #expect(table.count == 100)
        for n in 0..<100 {
            let index = try #require(table.index(of: "user:\(n)"))
            #expect(table[index].value == n)
            #expect(table.key(at: index) == "user:\(n)")
            table[index].value += 1000
        }
        #expect(table.index(of: "user:100") == nil)
        #expect(table[table.index(of: "user:42")!].value == 1042)
    }

    @Test func evictsTheFirstUnvisitedKeyTheHandReaches() throws {
        var table = try KeyTable<String, Expiring>(capacity: 3, whenFull: .evict)
        for key in ["a", "b", "c"] { _ = try table.lookup(key, now: .zero, orInsert: Expiring(value: 0)) }
        #expect(table.keys == ["a", "b", "c"])
        _ = try table.lookup("a", now: .zero, orInsert: Expiring(value: 0))  // a is visited
        let slot = try table.lookup("d", now: .zero, orInsert: Expiring(value: 0))
        // The hand passes over a (clearing its bit) and evicts b; d takes b's place.
        #expect(slot.evicted.map(\.key) == ["b"])
        #expect(slot.isNew)
        #expect(table.keys == ["a", "d", "c"])
        #expect(table.stats.evicted == 1)
        #expect(table.count == 3)
        // The hand stepped past d: c is the next candidate, then a (no longer visited), and d last.
        #expect(try table.lookup("e", now: .zero, orInsert: Expiring(value: 0)).evicted.map(\.key) == ["c"])
        #expect(try table.lookup("f", now: .zero, orInsert: Expiring(value: 0)).evicted.map(\.key) == ["a"])
        #expect(try table.lookup("g", now: .zero, orInsert: Expiring(value: 0)).evicted.map(\.key) == ["d"])
    }

    /// The table hands the storage of its last list of evicted entries to the next insertion that
    /// evicts: a list the caller keeps is never changed by a later eviction, and each list holds
    /// exactly what its own insertion evicted.
    @Test func aKeptListOfEvictedEntriesIsNotChangedByLaterEvictions() throws {
        var table = try KeyTable<String, Expiring>(capacity: 2, whenFull: .evict)
        for key in ["a", "b"] { _ = try table.lookup(key, now: .zero, orInsert: Expiring(value: 0)) }
        let first = try table.lookup("c", now: .zero, orInsert: Expiring(value: 1))
        let second = try table.lookup("d", now: .zero, orInsert: Expiring(value: 2))
        #expect(first.evicted.map(\.key) == ["a"])
        #expect(second.evicted.map(\.key) == ["b"])
        // Let go of both: the next eviction reuses the storage, and still reports only its own.
        var kept: [[String]] = [first.evicted.map(\.key), second.evicted.map(\.key)]
        for key in ["e", "f", "g"] {
            kept.append(try table.lookup(key, now: .zero, orInsert: Expiring(value: 3)).evicted.map(\.key))
        }
        #expect(kept == [["a"], ["b"], ["c"], ["d"], ["e"]])
        // An insertion that evicts nothing reports nothing, though the last list was not empty.
        var expiring = try KeyTable<String, Expiring>(capacity: 1, whenFull: .evict)
        _ = try expiring.lookup("x", now: .zero, orInsert: Expiring(value: 0, expiresAt: 5))
        #expect(try expiring.lookup("y", now: Instant(nanoseconds: 1), orInsert: Expiring(value: 0)).evicted.map(\.key) == ["x"])
        #expect(try expiring.lookup("z", now: Instant(nanoseconds: 2), orInsert: Expiring(value: 0, expiresAt: 3)).evicted.map(\.key) == ["y"])
        #expect(try expiring.lookup("w", now: Instant(nanoseconds: 4), orInsert: Expiring(value: 0)).evicted.isEmpty)
    }

    /// Removals give the storage past the remaining entries back to the system; the entries
    /// held keep their keys and states, and the storage given back takes new entries again.
    @Test func entriesSurviveTheStorageGivenBackAfterRemovals() throws {
        var table = try KeyTable<String, Expiring>(capacity: 60_000, whenFull: .evict)
        for n in 0..<60_000 { _ = try table.lookup("key:\(n)", now: .zero, orInsert: Expiring(value: n)) }
        // Removing all but 5,000 leaves megabytes of storage unused past the entries.
        for n in 5_000..<60_000 { #expect(table.removeValue(forKey: "key:\(n)")?.value == n) }
        #expect(table.count == 5_000)
        #expect(values(of: Array(0..<5_000), in: table) == Array(0..<5_000))
        for n in 60_000..<110_000 { _ = try table.lookup("key:\(n)", now: .zero, orInsert: Expiring(value: n)) }
        #expect(table.count == 55_000)
        let held = Array(0..<5_000) + Array(60_000..<110_000)
        #expect(values(of: held, in: table) == held)
        // A copy changed apart gives back only storage of its own: the original keeps every entry.
        var copy = table
        for n in 60_000..<110_000 { copy.removeValue(forKey: "key:\(n)") }
        #expect(copy.count == 5_000 && table.count == 55_000)
        #expect(values(of: held, in: table) == held)
        #expect(values(of: Array(0..<5_000), in: copy) == Array(0..<5_000))
    }

    #if os(Linux)
    /// Past its first 4 MiB the entries' storage is on huge pages, which the system backs whole:
    /// the table counts the rest of the one its last entry ends in.
    @Test func theHugePageTheLastEntryEndsInCounts() throws {
        var table = try KeyTable<String, Expiring>(capacity: 300_000, whenFull: .evict)
        let index = table.bytesUsed
        for n in 0..<1_000 { _ = try table.lookup("k\(n)", now: .zero, orInsert: Expiring(value: n)) }
        let perEntry = (table.bytesUsed - index) / 1_000
        #expect(perEntry > 0)
        // 160,000 entries of 40 bytes end past the first huge page, which begins at most 6 MiB in.
        for n in 1_000..<160_000 { _ = try table.lookup("k\(n)", now: .zero, orInsert: Expiring(value: n)) }
        let slack = table.bytesUsed - index - 160_000 * perEntry
        #expect(slack > 0 && slack < 2 << 20)
    }
    #endif

    /// The values held for keys `key:<n>`, one for each of `keys` the table holds.
    private func values(of keys: [Int], in table: KeyTable<String, Expiring>) -> [Int] {
        keys.compactMap { key in table.index(of: "key:\(key)").map { index in table[index].value } }
    }

    /// A flood of keys seen once never evicts a key that comes back between them, and the flood's
    /// own keys are evicted in turn.
    @Test func aKeyThatComesBackOutlivesAFloodOfUniqueKeys() throws {
        var table = try KeyTable<Int, Expiring>(capacity: 250, whenFull: .evict)
        let regular = Array(0..<25)
        for key in regular { _ = try table.lookup(key, now: .zero, orInsert: Expiring(value: key)) }
        var evicted: [Int] = []
        for key in 1_000..<6_000 {
            evicted += try table.lookup(key, now: .zero, orInsert: Expiring(value: key)).evicted.map(\.key)
            // Each regular key comes back once every 125 new keys (half the table's capacity).
            if key % 5 == 0 { _ = try table.lookup(regular[(key / 5) % 25], now: .zero, orInsert: Expiring(value: -1)) }
        }
        #expect(evicted.count == 5_000 - (250 - 25))
        #expect(regular.allSatisfy { table.index(of: $0) != nil })
        #expect(table.stats.evicted == evicted.count)
    }

    @Test func refusesWhenFullOfLiveKeys() throws {
        var table = try KeyTable<String, Expiring>(capacity: 2, whenFull: .refuse)
        _ = try table.lookup("a", now: .zero, orInsert: Expiring(value: 0, expiresAt: 100))
        _ = try table.lookup("b", now: .zero, orInsert: Expiring(value: 0))
        #expect(throws: SluiceError.self) { _ = try table.lookup("c", now: .zero, orInsert: Expiring(value: 0)) }
        // "a" is idle at 100: it makes room.
        _ = try table.lookup("c", now: Instant(nanoseconds: 100), orInsert: Expiring(value: 0))
        #expect(Set(table.keys) == ["b", "c"])
    }

    @Test func lazyExpiryResetsTheState() throws {
        var table = try KeyTable<String, Expiring>(capacity: 10, whenFull: .evict)
        _ = try table.lookup("a", now: .zero, orInsert: Expiring(value: 1, expiresAt: 50))
        let early = try table.lookup("a", now: Instant(nanoseconds: 49), orInsert: Expiring(value: 2))
        #expect(table[early.index].value == 1)
        let late = try table.lookup("a", now: Instant(nanoseconds: 50), orInsert: Expiring(value: 2))
        #expect(table[late.index].value == 2)
        #expect(table.stats.expired == 1)
    }

    @Test func incrementalSweep() throws {
        var table = try KeyTable<Int, Expiring>(capacity: 1000, whenFull: .evict)
        for n in 0..<1000 {
            _ = try table.lookup(n, now: .zero, orInsert: Expiring(value: n, expiresAt: n.isMultiple(of: 2) ? 10 : .max))
        }
        var removed = 0
        var rounds = 0
        while removed < 500 && rounds < 100 {
            let dropped = table.sweep(now: Instant(nanoseconds: 10), maxEntries: 64)
            #expect(dropped <= 64)
            removed += dropped
            rounds += 1
        }
        #expect(removed == 500)
        #expect(table.count == 500)
        for n in 0..<1000 {
            #expect((table.index(of: n) != nil) == !n.isMultiple(of: 2))
        }
        #expect(table.sweep(now: Instant(nanoseconds: 10), maxEntries: 10_000) == 0)
    }

    /// Keys arriving faster than a fixed-size sweep examines them: each key is idle 10 ticks
    /// after it arrives, 100 arrive per tick, and a sweep runs every tick. A sweep of 8 entries
    /// falls behind and the table fills to its capacity (room for new keys then comes from idle
    /// keys dropped on their way in); the sweep that keeps up leaves the table alone below three
    /// quarters of its capacity (idle keys cost memory the budget allows) and holds it there
    /// from then on, examining no more than twice the arrivals. Neither evicts a live key.
    @Test func aSweepKeepsUpWithArrivals() throws {
        var fixed = try KeyTable<Int, Expiring>(capacity: 8_000, whenFull: .evict)
        var keepingUp = try KeyTable<Int, Expiring>(capacity: 8_000, whenFull: .evict)
        var key = 0
        var largest = 0
        for tick in Int64(1)...400 {
            let now = Instant(nanoseconds: tick)
            for _ in 0..<100 {
                _ = try fixed.lookup(key, now: now, orInsert: Expiring(value: key, expiresAt: tick + 10))
                _ = try keepingUp.lookup(key, now: now, orInsert: Expiring(value: key, expiresAt: tick + 10))
                key += 1
            }
            fixed.sweep(now: now, maxEntries: 8)
            keepingUp.sweepKeepingUp(now: now, minimumEntries: 8)
            largest = max(largest, keepingUp.count)
        }
        #expect(fixed.count > 7_900)
        #expect(keepingUp.count >= 5_800 && largest <= 6_000 + 100)
        #expect(fixed.stats.evicted == 0)
        #expect(keepingUp.stats.evicted == 0)
    }

    @Test func budgetInBytes() throws {
        let perEntry = KeyTable<String, ThrottleState>.estimatedBytesPerEntry
        // One entry: the key (16 bytes), the state (17), the visited bit (1) and the hash (4, after
        // 2 bytes of padding): 40 bytes, then 4/3 of a 4-byte slot of index (rounded up).
        #expect(perEntry == 40 + 6)
        let capacity = KeyTable<String, ThrottleState>.capacity(for: .bytes(64 << 20))
        // The largest capacity whose entries and index fit.
        #expect(KeyTable<String, ThrottleState>.estimatedBytes(capacity: capacity) <= 64 << 20)
        #expect(KeyTable<String, ThrottleState>.estimatedBytes(capacity: capacity + 1) > 64 << 20)
        let table = try ThrottleTable<String>(options: try ThrottleOptions(interval: .seconds(1)), budget: .bytes(64 << 20))
        #expect(table.table.capacity == capacity)
        // Both limits: the smaller wins.
        #expect(KeyTable<String, ThrottleState>.capacity(for: MemoryBudget(entries: 10, bytes: 64 << 20)) == 10)
        #expect(throws: SluiceError.self) { try KeyTable<String, ThrottleState>(budget: .bytes(10), whenFull: .refuse) }
        #expect(throws: SluiceError.self) { try KeyTable<String, ThrottleState>(budget: MemoryBudget(entries: nil, bytes: nil), whenFull: .refuse) }
        // 64 MiB: an index of 2^21 UInt32 slots (8 MiB, at most three quarters full) and 56 MiB of
        // 40-byte entries.
        #expect(capacity == (56 << 20) / 40)
        #expect(KeyTable<String, ThrottleState>.estimatedBytes(capacity: capacity) == capacity * 40 + (8 << 20))
        // Long keys own heap storage: counting it shrinks the capacity.
        #expect(KeyTable<String, ThrottleState>.capacity(for: .bytes(64 << 20, extraBytesPerKey: 48)) < capacity)
    }

    @Test func keysAreComparedInFull() throws {
        /// A key whose hash always collides.
        struct Colliding: Hashable {
            var name: String
            func hash(into hasher: inout Hasher) { hasher.combine(0) }
        }
        var table = try KeyTable<Colliding, Expiring>(capacity: 50, whenFull: .refuse)
        for n in 0..<50 { _ = try table.lookup(Colliding(name: "k\(n)"), now: .zero, orInsert: Expiring(value: n)) }
        for n in 0..<50 { #expect(table[table.index(of: Colliding(name: "k\(n)"))!].value == n) }
        for n in stride(from: 0, to: 50, by: 3) { #expect(table.removeValue(forKey: Colliding(name: "k\(n)"))?.value == n) }
        for n in 0..<50 { #expect((table.index(of: Colliding(name: "k\(n)")) != nil) == !n.isMultiple(of: 3)) }
    }

    @Test func throttleTableReportsEvictedPendingEvents() throws {
        let options = try ThrottleOptions(interval: .seconds(1), leading: true, trailing: true)
        var table = try ThrottleTable<String>(options: options, budget: .entries(1))
        #expect(try table.event(EventToken(1), key: "a", now: .zero).decision == .run)
        #expect(try table.event(EventToken(2), key: "a", now: .ms(10)).decision == .hold(schedule: .ms(1_000), superseded: nil))
        let other = try table.event(EventToken(3), key: "b", now: .ms(20))
        #expect(other.decision == .run)
        #expect(other.evictedPending == [EventToken(2)])
        #expect(table.fire(key: "a", now: .ms(1_000)) == FireDecision.none)
    }
}
