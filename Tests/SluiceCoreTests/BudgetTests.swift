import SluiceCore
import Testing

/// Budgets that hold what a key really costs: the keys' own heap bytes and the side state the
/// runtime charges.
@Suite struct BudgetTests {
    private func longKey(_ n: Int) -> String { "customer-\(n)-" + String(repeating: "x", count: 100) }

    @Test func longKeysCountAgainstTheByteBudget() throws {
        let budget = MemoryBudget.bytes(16 << 10)
        var short = try KeyTable<String, Expiring>(budget: budget, whenFull: .refuse)
        var long = try KeyTable<String, Expiring>(budget: budget, whenFull: .refuse)
        var shortCount = 0
        while (try? short.lookup("u\(shortCount)", now: .zero, orInsert: Expiring(value: 0))) != nil { shortCount += 1 }
        var longCount = 0
        while (try? long.lookup(longKey(longCount), now: .zero, orInsert: Expiring(value: 0))) != nil { longCount += 1 }
        #expect(shortCount == short.capacity)
        // A 112-byte key costs a 160-byte heap object besides its entry.
        #expect(longCount < shortCount / 2)
        #expect(long.bytesUsed <= 16 << 10)
        #expect(short.bytesUsed <= 16 << 10)
        #expect(String(repeating: "x", count: 112).heapByteEstimate == 160)
        #expect("fifteen-bytes!!".heapByteEstimate == 0)
    }

    @Test func removingAKeyGivesItsBytesBack() throws {
        var table = try KeyTable<String, Expiring>(budget: .bytes(16 << 10), whenFull: .refuse)
        let empty = table.bytesUsed
        _ = try table.lookup(longKey(1), now: .zero, orInsert: Expiring(value: 0))
        #expect(table.bytesUsed > empty + 160)
        table.removeValue(forKey: longKey(1))
        #expect(table.bytesUsed == empty)
    }

    @Test func anEvictingTableEvictsAsManyKeysAsALongKeyNeeds() throws {
        // A budget with no slack once the table is full of short keys: a long key's heap bytes
        // must come from evicted entries.
        let budget = KeyTable<String, Expiring>.estimatedBytes(capacity: 64)
        var table = try KeyTable<String, Expiring>(budget: .bytes(budget), whenFull: .evict)
        #expect(table.capacity == 64)
        var n = 0
        while table.count < table.capacity {
            _ = try table.lookup("s\(n)", now: .zero, orInsert: Expiring(value: n))
            n += 1
        }
        let slot = try table.lookup(longKey(0), now: .zero, orInsert: Expiring(value: -1))
        #expect(slot.evicted.count >= 2)
        #expect(slot.evicted.first?.key == "s0")
        #expect(table.bytesUsed <= budget)
        #expect(table.stats.evicted == slot.evicted.count)
    }

    @Test func aKeyLargerThanTheWholeBudgetIsRefusedNotATrap() throws {
        let budget = MemoryBudget.bytes(800)
        var table = try ThrottleTable<String>(options: try ThrottleOptions(interval: .seconds(1)), budget: budget)
        #expect(throws: SluiceError.self) {
            _ = try table.event(EventToken(1), key: String(repeating: "k", count: 1_000), now: .zero)
        }
        #expect(try table.event(EventToken(2), key: "short", now: .zero).decision == .run)
    }

    /// A key that would not fit even in an emptied table is refused before any live key is
    /// evicted: an eviction lost behind the error would drop a held event unanswered and give a
    /// throttled key its burst back (found by fuzz-tables).
    @Test func aKeyThatCannotFitEvictsNothing() throws {
        var table = try KeyTable<String, Expiring>(budget: .bytes(4 << 10), whenFull: .evict)
        let charged = table.charge(bytes: 2 << 10, now: .zero)
        #expect(charged)
        // Fill it until the next key evicts one: the table is full of live keys.
        var n = 0
        while (try table.lookup("s\(n)", now: .zero, orInsert: Expiring(value: n))).evicted.isEmpty {
            n += 1
        }
        let present = (0...n).filter { table.index(of: "s\($0)") != nil }
        let evicted = table.stats.evicted
        #expect(present.count > 1)
        // Fits the whole budget, but not what the charge leaves.
        let tooLong = String(repeating: "x", count: 2 << 10)
        #expect(throws: SluiceError.self) {
            _ = try table.lookup(tooLong, now: .zero, orInsert: Expiring(value: -1))
        }
        #expect(table.stats.evicted == evicted)
        #expect((0...n).filter { table.index(of: "s\($0)") != nil } == present)
    }

    /// The same at the policy level: a held trailing event of another key survives a refused
    /// key and still fires.
    @Test func aRefusedKeyLeavesAHeldEventInPlace() throws {
        let options = try ThrottleOptions(interval: .seconds(1), leading: true, trailing: true)
        var table = try ThrottleTable<String>(options: options, budget: .bytes(800))
        let first = try table.event(EventToken(1), key: "held", now: .zero)
        #expect(first.decision == .run)
        _ = try table.event(EventToken(2), key: "held", now: .ms(10))
        #expect(table.table[try #require(table.table.index(of: "held"))].pending == EventToken(2))
        #expect(throws: SluiceError.self) {
            _ = try table.event(EventToken(3), key: String(repeating: "k", count: 1_000), now: .ms(20))
        }
        let fired = table.fire(key: "held", now: .ms(1_000))
        #expect(fired == .run(EventToken(2)))
    }

    @Test func chargesAreBoundedAndGiveRoomBackWhenReleased() throws {
        var table = try KeyTable<String, Expiring>(budget: .bytes(4 << 10), whenFull: .refuse)
        var taken = 0
        while table.charge(bytes: 256, now: .zero) { taken += 1 }
        #expect(taken > 0)
        #expect(table.bytesUsed <= 4 << 10)
        #expect(table.stats.refusedCharges == 1)
        table.release(bytes: 256)
        let again = table.charge(bytes: 256, now: .zero)
        #expect(again)
    }

    @Test func chargesDropIdleKeysButNeverLiveOnes() throws {
        var table = try KeyTable<String, Expiring>(budget: .bytes(4 << 10), whenFull: .refuse)
        for n in 0..<table.capacity {
            _ = try table.lookup("live\(n)", now: .zero, orInsert: Expiring(value: n, expiresAt: n.isMultiple(of: 2) ? 10 : .max))
        }
        let before = table.count
        while table.charge(bytes: 64, now: .ms(20)) {}
        // Only the idle half could go.
        #expect(table.count >= before / 2)
        for n in stride(from: 1, to: before, by: 2) { #expect(table.index(of: "live\(n)") != nil) }
    }

    @Test func withoutAByteLimitChargesAreBoundedByCapacity() throws {
        var table = try KeyTable<String, Expiring>(budget: .entries(5), whenFull: .refuse)
        let taken = (0..<81).map { _ in table.charge(bytes: 1 << 20, now: .zero) }
        #expect(taken.filter { $0 }.count == 80)
        #expect(taken.last == false)
        #expect(KeyTable<String, Expiring>.chargeLimit(capacity: 1) == 64)
    }
}

@Suite struct LeaseTests {
    typealias Table = IdempotencyTable<String, String, String>

    @Test func anOwnerHoldingItsRecordUntilReleaseIsNeverTakenOverOrSwept() throws {
        var table = try Table(options: try IdempotencyOptions(retention: .seconds(60), lease: .seconds(10)), budget: .entries(4))
        let owner = EventToken(1)
        #expect(try table.begin(key: "k", fingerprint: "f", token: owner, now: .zero, lease: .untilReleased) == .execute(takeover: nil))
        let hourLater = Instant(milliseconds: 3_600_000)
        #expect(try table.begin(key: "k", fingerprint: "f", token: EventToken(2), now: hourLater) == .join(owner: owner))
        #expect(try table.begin(key: "k", fingerprint: "g", token: EventToken(3), now: hourLater) == .mismatch)
        let swept = table.sweep(now: hourLater, maxEntries: 10)
        #expect(swept == 0)
        // Renewing never shortens a lease held until release.
        let renewed = table.renewLease(key: "k", owner: owner, now: hourLater)
        #expect(renewed)
        #expect(try table.begin(key: "k", fingerprint: "f", token: EventToken(4), now: Instant(milliseconds: 7_200_000)) == .join(owner: owner))
        let completion = table.complete(key: "k", owner: owner, result: "done", now: hourLater)
        #expect(completion == .stored)
        #expect(try table.begin(key: "k", fingerprint: "f", token: EventToken(5), now: hourLater) == .replay("done"))
    }
}

@Suite struct SingleFlightLeaveTests {
    @Test func theWorkIsAbandonedOnlyWhenItsLastWaiterLeaves() {
        var flights = SingleFlight<String>()
        let leader = EventToken(1)
        #expect(flights.begin(leader, key: "page") == .lead)
        #expect(flights.begin(EventToken(2), key: "page") == .join(leader: leader))
        #expect(flights.begin(EventToken(3), key: "page") == .join(leader: leader))
        #expect(flights.waiterCount(for: "page") == 3)
        #expect(flights.leave(leader, key: "page") == .stillShared(remaining: 2))
        #expect(flights.leave(leader, key: "page") == .notWaiting)
        #expect(flights.leave(EventToken(3), key: "page") == .stillShared(remaining: 1))
        #expect(flights.leave(EventToken(9), key: "page") == .notWaiting)
        #expect(flights.leave(EventToken(2), key: "page") == .abandoned(leader: leader))
        #expect(flights.count == 0)
        // A new request leads a new flight.
        #expect(flights.begin(EventToken(4), key: "page") == .lead)
    }

    @Test func completionHandsTheResultToThoseStillWaiting() {
        var flights = SingleFlight<String>()
        _ = flights.begin(EventToken(1), key: "k")
        _ = flights.begin(EventToken(2), key: "k")
        _ = flights.begin(EventToken(3), key: "k")
        _ = flights.leave(EventToken(2), key: "k")
        _ = flights.leave(EventToken(1), key: "k")
        #expect(flights.complete(key: "k", leader: EventToken(1)) == [EventToken(3)])
    }
}

@Suite struct StableHashTests {
    /// Values from an independent FNV-1a + fmix64 implementation: the same in every process and
    /// on every platform.
    @Test func knownValues() {
        #expect(StableHash.of("") == 0xefd0_1f60_ba99_2926)
        #expect(StableHash.of("user42") == 0xda60_44ba_e879_d2da)
        #expect(StableHash.of("acct") == 0xefd0_ed19_74cf_568a)
        #expect(StableHash.of("k") == 0x2ba4_37a9_75bf_0065)
    }

    @Test func lowBitsSpreadSequentialKeys() {
        let odd = (0..<1_000).filter { StableHash.of("user:\($0)") % 2 == 1 }.count
        #expect((400...600).contains(odd))
    }
}
