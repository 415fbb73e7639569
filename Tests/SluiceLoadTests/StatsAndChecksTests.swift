import Histogram
import SluiceCore
import SluiceLoadCore
import Testing

@Suite("histogram merging")
struct HistogramMergeTests {
    @Test("merging per-loop stats equals recording everything in one")
    func mergeEqualsSingle() {
        var first = LatencyStats()
        var second = LatencyStats()
        var single = LatencyStats()
        var random = SplitMix64(seed: 11)
        for index in 0..<20_000 {
            let latency = Int64.random(in: 1_000...5_000_000, using: &random)
            let verb: Verb = index % 3 == 0 ? .pay : .echo
            let kind: ReplyKind = index % 7 == 0 ? .okReplayed : .ok
            if index % 2 == 0 {
                first.recordSent(verb)
                first.record(verb, kind, latencyNanoseconds: latency)
            } else {
                second.recordSent(verb)
                second.record(verb, kind, latencyNanoseconds: latency)
            }
            single.recordSent(verb)
            single.record(verb, kind, latencyNanoseconds: latency)
        }
        var merged = LatencyStats()
        merged.merge(first)
        merged.merge(second)
        #expect(merged.totalReplies == 20_000)
        #expect(merged.totalSent == 20_000)
        for verb in Verb.allCases {
            #expect(merged.sent(verb) == single.sent(verb))
            for kind in ReplyKind.allCases {
                #expect(merged.count(verb, kind) == single.count(verb, kind))
            }
            #expect(LatencySummary(merged.perVerb[verb.rawValue]) == LatencySummary(single.perVerb[verb.rawValue]))
        }
        #expect(LatencySummary(merged.overall) == LatencySummary(single.overall))
        // And the merge is not a no-op: the halves alone differ from the whole.
        #expect(LatencySummary(first.overall).count == 10_000)
    }

    @Test("percentiles of known values (3 significant digits)")
    func knownPercentiles() {
        var stats = LatencyStats()
        // 1 µs … 1000 µs, one each: p50 ≈ 500 µs, p99 ≈ 990 µs, max ≈ 1000 µs.
        for micro in 1...1000 {
            stats.record(.echo, .ok, latencyNanoseconds: Int64(micro) * 1000)
        }
        let summary = LatencySummary(stats.overall)
        #expect(summary.count == 1000)
        #expect(abs(summary.p50 - 500) <= 1)
        #expect(abs(summary.p90 - 900) <= 1)
        #expect(abs(summary.p99 - 990) <= 1)
        #expect(abs(summary.p999 - 999) <= 1.5)
        #expect(abs(summary.max - 1000) <= 1.5)
    }

    @Test("latencies outside the range are clamped, not lost")
    func clamping() {
        var stats = LatencyStats()
        stats.record(.tap, .ok, latencyNanoseconds: -5)
        stats.record(.tap, .ok, latencyNanoseconds: Int64.max)
        #expect(stats.perVerb[Verb.tap.rawValue].totalCount == 2)
    }
}

@Suite("payment ledger")
struct PaymentLedgerTests {
    @Test("one charge id per pair; a second id is a conflict, also across merged ledgers")
    func conflicts() {
        var first = PaymentLedger()
        first.recordSent(duplicate: false)
        first.recordCharge(pair: 1, chargeID: "c1")
        first.recordCharge(pair: 1, chargeID: "c1")
        #expect(first.conflictingPairs.isEmpty)
        var second = PaymentLedger()
        second.recordSent(duplicate: true)
        second.recordCharge(pair: 1, chargeID: "c2")
        second.recordCharge(pair: 2, chargeID: "c3")
        first.merge(second)
        #expect(first.conflictingPairs == [1])
        #expect(first.uniquePairsSent == 1)
        #expect(first.duplicatesSent == 1)
    }
}

@Suite("correctness checks")
struct CorrectnessCheckTests {
    /// An outcome every check accepts: 100 requests, 100 replies, 10 PAYs over 7 pairs, one
    /// pair refused busy and 6 answered OK, and STATS payments grown by 6.
    static func healthy() -> LoadOutcome {
        var outcome = LoadOutcome()
        outcome.sent = 100
        outcome.replies = 100
        outcome.paySent = 10
        outcome.uniquePairs = 7
        outcome.chargedPairs = 6
        outcome.busyReplies = 1
        outcome.instances = [
            InstanceStats(
                port: 7070, before: ServerStats(fields: ["payments": 40, "declines": 2]),
                after: ServerStats(fields: ["payments": 46, "declines": 2]))
        ]
        return outcome
    }

    @Test("a healthy run passes every check, including the payment check")
    func healthyPasses() {
        let results = CorrectnessChecks.evaluate(Self.healthy())
        #expect(results.count == 6)
        #expect(CorrectnessChecks.allPassed(results))
    }

    @Test(
        "each broken fact fails its check, and only its check",
        arguments: [
            ("missing reply", "every request got exactly one reply"),
            ("reply without request", "every request got exactly one reply"),
            ("fewer replies", "every request got exactly one reply"),
            ("ERR reply", "no unexpected ERR"),
            ("- ERR line", "no unexpected ERR"),
            ("unexpected status", "only statuses the protocol allows"),
            ("bad echo", "replies match their requests"),
            ("closed early", "connections stayed open"),
            ("double charge", "PAY charges (STATS) = (key, idem) pairs answered OK"),
            ("lost charge", "PAY charges (STATS) = (key, idem) pairs answered OK"),
            ("two charge ids", "PAY charges (STATS) = (key, idem) pairs answered OK"),
            ("a decline", "PAY charges (STATS) = (key, idem) pairs answered OK"),
            ("no STATS", "PAY charges (STATS) = (key, idem) pairs answered OK"),
            ("a busy pair charged", "PAY charges (STATS) = (key, idem) pairs answered OK"),
        ])
    func brokenFails(fault: String, check: String) throws {
        var outcome = Self.healthy()
        switch fault {
        case "missing reply": outcome.missingReplies = 1; outcome.replies = 99
        case "reply without request": outcome.unmatchedReplies = 1
        case "fewer replies": outcome.replies = 99
        case "ERR reply": outcome.errorReplies = 1
        case "- ERR line": outcome.connectionErrors = 1
        case "unexpected status": outcome.unexpectedReplies = 1
        case "bad echo": outcome.badReplies = 1
        case "closed early": outcome.connectionsClosedEarly = 1
        case "double charge": outcome.instances[0].after = ServerStats(fields: ["payments": 47, "declines": 2])
        case "lost charge": outcome.instances[0].after = ServerStats(fields: ["payments": 45, "declines": 2])
        case "two charge ids": outcome.conflictingPairs = 1
        case "a decline": outcome.instances[0].after = ServerStats(fields: ["payments": 46, "declines": 3])
        case "no STATS": outcome.instances[0].after = nil
        case "a busy pair charged": outcome.instances[0].after = ServerStats(fields: ["payments": 47, "declines": 2])
        default: Issue.record("unknown fault \(fault)")
        }
        let results = CorrectnessChecks.evaluate(outcome)
        #expect(!CorrectnessChecks.allPassed(results))
        let failed = results.filter { !$0.passed }.map(\.name)
        #expect(failed == [check])
    }

    @Test("no PAY sent: no payment check, STATS not needed")
    func noPayments() {
        var outcome = LoadOutcome()
        outcome.sent = 5
        outcome.replies = 5
        let results = CorrectnessChecks.evaluate(outcome)
        #expect(results.count == 5)
        #expect(CorrectnessChecks.allPassed(results))
    }
}

@Suite("in-flight table")
struct InFlightTableTests {
    @Test("out-of-order removal, unknown and repeated ids, growth past a collision")
    func table() {
        var table = InFlightTable<String>(capacity: 2)
        #expect(table.slotCount == 16)
        for id in UInt64(1)...10 { table.insert("r\(id)", id: id) }
        #expect(table.count == 10)
        #expect(table.remove(id: 7) == "r7")
        #expect(table.remove(id: 7) == nil)  // answered twice
        #expect(table.remove(id: 99) == nil)  // never sent
        #expect(table.remove(id: 0) == nil)
        #expect(table.remove(id: 2) == "r2")
        // Id 17 lands on id 1's slot while 1 is still in flight: the table grows.
        table.insert("r17", id: 17)
        #expect(table.slotCount == 32)
        #expect(table.remove(id: 1) == "r1")
        #expect(table.remove(id: 17) == "r17")
        for id: UInt64 in [3, 4, 5, 6, 8, 9, 10] { #expect(table.remove(id: id) == "r\(id)") }
        #expect(table.count == 0)
    }

    @Test("a long run with a sliding window of 1000 ids in flight matches a dictionary")
    func slidingWindow() {
        var table = InFlightTable<UInt64>(capacity: 8)
        var model: [UInt64: UInt64] = [:]
        var random = SplitMix64(seed: 5)
        var next: UInt64 = 1
        for _ in 0..<50_000 {
            if model.count < 1000 && (model.isEmpty || random.next() % 2 == 0) {
                table.insert(next * 3, id: next)
                model[next] = next * 3
                next += 1
            } else {
                let id = model.keys.randomElement(using: &random)!
                #expect(table.remove(id: id) == model.removeValue(forKey: id))
            }
        }
        #expect(table.count == model.count)
    }
}
