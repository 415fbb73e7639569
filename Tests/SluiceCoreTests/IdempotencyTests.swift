import SluiceCore
import Testing

@Suite struct IdempotencyTests {
    typealias Table = IdempotencyTable<String, String, String>
    static let options = try! IdempotencyOptions(retention: .seconds(60), lease: .seconds(10), concurrent: .join, cacheErrors: true)

    func table(_ options: IdempotencyOptions = options, entries: Int = 100) throws -> Table {
        try Table(options: options, budget: .entries(entries))
    }

    @Test func lifecycle() throws {
        var t = try table()
        let a = EventToken(1), b = EventToken(2), c = EventToken(3)
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 10", token: a, now: .ms(0)) == .execute(takeover: nil))
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 10", token: b, now: .ms(5)) == .join(owner: a))
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 99", token: c, now: .ms(6)) == .mismatch)
        #expect(t.complete(key: "idem-1", owner: a, result: "charged", now: .ms(100)) == .stored)
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 10", token: c, now: .ms(200)) == .replay("charged"))
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 99", token: c, now: .ms(200)) == .mismatch)
        // Retention runs from completion: 100 ms + 60 s.
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 10", token: c, now: .ms(60_099)) == .replay("charged"))
        #expect(try t.begin(key: "idem-1", fingerprint: "pay 10", token: c, now: .ms(60_100)) == .execute(takeover: nil))
    }

    @Test func rejectConcurrent() throws {
        var t = try table(try IdempotencyOptions(retention: .seconds(60), lease: .seconds(10), concurrent: .reject))
        #expect(try t.begin(key: "k", fingerprint: "f", token: EventToken(1), now: .ms(0)) == .execute(takeover: nil))
        #expect(try t.begin(key: "k", fingerprint: "f", token: EventToken(2), now: .ms(1)) == .conflict)
        #expect(try t.begin(key: "k", fingerprint: "g", token: EventToken(3), now: .ms(1)) == .mismatch)
    }

    @Test func expiredLeaseIsTakenOver() throws {
        var t = try table()
        let dead = EventToken(1), heir = EventToken(2)
        _ = try t.begin(key: "k", fingerprint: "f", token: dead, now: .ms(0))
        #expect(try t.begin(key: "k", fingerprint: "f", token: heir, now: .ms(9_999)) == .join(owner: dead))
        #expect(try t.begin(key: "k", fingerprint: "f", token: heir, now: .ms(10_000)) == .execute(takeover: dead))
        // The presumed-dead owner's late result is ignored; the heir's is stored.
        #expect(t.complete(key: "k", owner: dead, result: "late", now: .ms(10_001)) == .notOwner)
        #expect(t.complete(key: "k", owner: heir, result: "done", now: .ms(10_002)) == .stored)
        #expect(try t.begin(key: "k", fingerprint: "f", token: EventToken(3), now: .ms(10_003)) == .replay("done"))
    }

    @Test func renewedLeaseIsNotTakenOver() throws {
        var t = try table()
        _ = try t.begin(key: "k", fingerprint: "f", token: EventToken(1), now: .ms(0))
        let renewedByOwner = t.renewLease(key: "k", owner: EventToken(1), now: .ms(9_000))
        let renewedByOther = t.renewLease(key: "k", owner: EventToken(2), now: .ms(9_000))
        #expect(renewedByOwner)
        #expect(!renewedByOther)
        #expect(try t.begin(key: "k", fingerprint: "f", token: EventToken(2), now: .ms(18_999)) == .join(owner: EventToken(1)))
    }

    @Test func cancelReleases() throws {
        var t = try table()
        _ = try t.begin(key: "k", fingerprint: "f", token: EventToken(1), now: .ms(0))
        let cancelledByOther = t.cancel(key: "k", owner: EventToken(2))
        let cancelledByOwner = t.cancel(key: "k", owner: EventToken(1))
        #expect(!cancelledByOther)
        #expect(cancelledByOwner)
        #expect(t.table.count == 0)
        #expect(try t.begin(key: "k", fingerprint: "other", token: EventToken(2), now: .ms(1)) == .execute(takeover: nil))
    }

    @Test(arguments: [true, false])
    func errors(cached: Bool) throws {
        var t = try table(try IdempotencyOptions(retention: .seconds(60), lease: .seconds(10), cacheErrors: cached))
        _ = try t.begin(key: "k", fingerprint: "f", token: EventToken(1), now: .ms(0))
        let outcome = t.complete(key: "k", owner: EventToken(1), result: "declined", isError: true, now: .ms(1))
        let next = try t.begin(key: "k", fingerprint: "f", token: EventToken(2), now: .ms(2))
        if cached {
            #expect(outcome == .stored)
            #expect(next == .replay("declined"))
        } else {
            #expect(outcome == .released)
            #expect(next == .execute(takeover: nil))
        }
    }

    @Test func fullTableRefusesNewKeysButNotKnownOnes() throws {
        var t = try table(entries: 2)
        _ = try t.begin(key: "a", fingerprint: "f", token: EventToken(1), now: .ms(0))
        _ = try t.begin(key: "b", fingerprint: "f", token: EventToken(2), now: .ms(0))
        #expect(throws: SluiceError.self) { try t.begin(key: "c", fingerprint: "f", token: EventToken(3), now: .ms(1)) }
        do {
            _ = try t.begin(key: "c", fingerprint: "f", token: EventToken(3), now: .ms(1))
        } catch {
            #expect(error.code == .tableBusy)
            #expect(error.value == "capacity 2")
        }
        // Known keys still work when full.
        #expect(try t.begin(key: "a", fingerprint: "f", token: EventToken(4), now: .ms(1)) == .join(owner: EventToken(1)))
        #expect(t.table.stats.refused == 2)  // two attempts for "c" above
        // Once records expire, a new key takes the least recently used one's place (never a live
        // record's): "a" (lease ran out at 10 s, last touched at 1 ms) goes before "b".
        _ = t.complete(key: "b", owner: EventToken(2), result: "r", now: .ms(2))
        #expect(throws: SluiceError.self) { try t.begin(key: "c", fingerprint: "f", token: EventToken(5), now: .ms(9_999)) }
        #expect(try t.begin(key: "c", fingerprint: "f", token: EventToken(5), now: .ms(60_002)) == .execute(takeover: nil))
        #expect(t.table.index(of: "a") == nil)
        #expect(t.table.count == 2)
        // "b" expired too: lazily, on access.
        #expect(try t.begin(key: "b", fingerprint: "f", token: EventToken(6), now: .ms(60_002)) == .execute(takeover: nil))
    }

}
