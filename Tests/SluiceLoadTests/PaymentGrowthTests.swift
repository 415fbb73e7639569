import SluiceLoadCore
import Testing

@Suite("the payment check over several instances")
struct PaymentGrowthTests {
    static let lineCheck = "PAY charges (STATS) = (key, idem) pairs answered OK"
    static let httpCheck = "PAY charges (/metrics) = (key, Idempotency-Key) pairs answered 201"

    /// The probes of one instance whose `payments` went from `before` to `after`.
    static func instance(_ port: Int, payments before: Int, _ after: Int, declines: (Int, Int) = (0, 0)) -> InstanceStats {
        InstanceStats(
            port: port, before: ServerStats(fields: ["payments": before, "declines": declines.0, "taps": 1]),
            after: ServerStats(fields: ["payments": after, "declines": declines.1, "taps": 2]))
    }

    /// An outcome with 10 PAYs, `charged` pairs answered OK, and `instances` probed.
    static func outcome(charged: Int, _ instances: [InstanceStats], http: Bool = false) -> LoadOutcome {
        var outcome = LoadOutcome()
        outcome.http = http
        outcome.sent = 10
        outcome.replies = 10
        outcome.paySent = 10
        outcome.uniquePairs = charged
        outcome.chargedPairs = charged
        outcome.instances = instances
        return outcome
    }

    static func paymentCheck(_ outcome: LoadOutcome) throws -> CheckResult {
        try #require(CorrectnessChecks.evaluate(outcome).first { $0.name.hasPrefix("PAY charges") })
    }

    @Test("the growth is summed over the instances, each one's share kept")
    func summed() throws {
        let growth = try PaymentGrowth(
            probes: [Self.instance(7000, payments: 10, 13), Self.instance(7001, payments: 0, 4, declines: (1, 2)), Self.instance(7002, payments: 5, 5)],
            http: false)
        #expect(growth.charges == 7)
        #expect(growth.declines == 1)
        #expect(growth.instances.map(\.port) == [7000, 7001, 7002])
        #expect(growth.instances.map(\.charges) == [3, 4, 0])
        #expect(growth.notes.isEmpty)
    }

    @Test("charges summed over the instances = pairs answered OK passes, and the detail shows each share")
    func passes() throws {
        let outcome = Self.outcome(charged: 7, [Self.instance(7000, payments: 10, 13), Self.instance(7001, payments: 0, 4)])
        let results = CorrectnessChecks.evaluate(outcome)
        #expect(CorrectnessChecks.allPassed(results), "\(results)")
        let check = try Self.paymentCheck(outcome)
        #expect(check.detail.hasPrefix("charges=7 (7000: 3, 7001: 4) pairs answered OK=7"), "\(check.detail)")
    }

    @Test("one instance alone: the detail is as before, without a per-instance share")
    func singleInstance() throws {
        let check = try Self.paymentCheck(Self.outcome(charged: 3, [Self.instance(7070, payments: 10, 13)]))
        #expect(check.passed)
        #expect(check.detail.hasPrefix("charges=3 pairs answered OK=3"), "\(check.detail)")
    }

    @Test(
        "a pair charged by two instances, or one charge missing, fails: the sum is what counts",
        arguments: [(3, 5, false), (3, 3, false), (3, 4, true)])
    func sumMismatch(first: Int, second: Int, passes: Bool) throws {
        // 7 pairs answered OK; neither instance alone shows a wrong figure.
        let outcome = Self.outcome(charged: 7, [Self.instance(7000, payments: 0, first), Self.instance(7001, payments: 0, second)])
        let check = try Self.paymentCheck(outcome)
        #expect(check.passed == passes, "\(check.detail)")
        #expect(check.name == Self.lineCheck)
        #expect(check.detail.hasPrefix("charges=\(first + second) (7000: \(first), 7001: \(second))"), "\(check.detail)")
    }

    @Test("declines are summed over the instances too")
    func declines() throws {
        var outcome = Self.outcome(
            charged: 2, [Self.instance(7000, payments: 0, 1, declines: (0, 1)), Self.instance(7001, payments: 0, 1, declines: (4, 5))])
        #expect(try !Self.paymentCheck(outcome).passed)
        outcome.declinedPairs = 2
        let check = try Self.paymentCheck(outcome)
        #expect(check.passed, "\(check.detail)")
        #expect(check.detail.contains("declines=2 pairs declined=2"))
    }

    @Test("an instance that cannot be probed fails the check, named by its port; the others are not named")
    func unprobed() throws {
        var silent = Self.instance(7001, payments: 0, 4)
        silent.after = nil
        let check = try Self.paymentCheck(Self.outcome(charged: 7, [Self.instance(7000, payments: 10, 13), silent]))
        #expect(!check.passed)
        #expect(check.detail == "port 7001: the server did not answer STATS after the run")

        var neither = Self.instance(7002, payments: 0, 0)
        neither.before = nil
        neither.after = nil
        let both = try Self.paymentCheck(Self.outcome(charged: 7, [silent, Self.instance(7000, payments: 10, 13), neither]))
        #expect(!both.passed)
        #expect(
            both.detail
                == "port 7001: the server did not answer STATS after the run; port 7002: the server did not answer STATS before and after the run")
        let failure = #expect(throws: PaymentGrowth.ProbeFailure.self) {
            try PaymentGrowth(probes: [silent, Self.instance(7000, payments: 10, 13), neither], http: false)
        }
        #expect(failure?.problems.map(\.port) == [7001, 7002])
    }

    @Test("line mode: STATS without payments= on one instance fails, naming it")
    func noPaymentsField() throws {
        let bare = InstanceStats(port: 7001, before: ServerStats(fields: ["taps": 1]), after: ServerStats(fields: ["taps": 2]))
        let check = try Self.paymentCheck(Self.outcome(charged: 3, [Self.instance(7000, payments: 0, 3), bare]))
        #expect(!check.passed)
        #expect(check.detail == "port 7001: the server did not report payments= in STATS")
    }

    @Test("HTTP: a counter missing from one instance's page reads as 0, with a note naming the port")
    func httpMissingCounter() throws {
        let fresh = InstanceStats(port: 8081, before: ServerStats(metrics: ""), after: ServerStats(metrics: "sluice_payments_total 4\n"))
        let outcome = Self.outcome(charged: 7, [Self.instance(8080, payments: 10, 13), fresh], http: true)
        let check = try Self.paymentCheck(outcome)
        #expect(check.name == Self.httpCheck)
        #expect(check.passed, "\(check.detail)")
        #expect(check.detail.hasPrefix("charges=7 (8080: 3, 8081: 4) pairs answered 201=7"), "\(check.detail)")
        #expect(check.detail.hasSuffix("(port 8081: sluice_payments_total missing before the run: read as 0)"), "\(check.detail)")

        var silent = fresh
        silent.before = nil
        let failed = try Self.paymentCheck(Self.outcome(charged: 7, [Self.instance(8080, payments: 10, 13), silent], http: true))
        #expect(!failed.passed)
        #expect(failed.detail == "port 8081: GET /metrics did not answer 200 before the run")
    }

    @Test("no instance probed at all fails the check")
    func nothingProbed() throws {
        let check = try Self.paymentCheck(Self.outcome(charged: 1, []))
        #expect(!check.passed)
        #expect(check.detail == "no instance was probed")
    }

    @Test("the outcome's statsBefore/statsAfter are the instances' counters summed; nil when one is missing")
    func summedStats() {
        var outcome = Self.outcome(charged: 7, [Self.instance(7000, payments: 10, 13), Self.instance(7001, payments: 0, 4)])
        #expect(outcome.statsBefore == ServerStats(fields: ["payments": 10, "declines": 0, "taps": 2]))
        #expect(outcome.statsAfter == ServerStats(fields: ["payments": 17, "declines": 0, "taps": 4]))
        outcome.instances[1].after = nil
        #expect(outcome.statsAfter == nil)
        #expect(outcome.statsBefore != nil)
        outcome.instances = []
        #expect(outcome.statsBefore == nil)
        #expect(ServerStats.summed([ServerStats(fields: ["a": 1]), ServerStats(fields: ["a": 2, "b": 5])]) == ServerStats(fields: ["a": 3, "b": 5]))
    }

    @Test("one ledger for every instance's replies: a replay of another instance's charge is fine, a second charge id is not")
    func ledgerSpansInstances() {
        // Connections 0 and 1 go to two ports and, with two loops, record into two ledgers that
        // the runner merges: pair 1 charged via one instance, replayed via the other.
        var viaFirst = PaymentLedger()
        viaFirst.recordSent(duplicate: false)
        viaFirst.recordCharge(pair: 1, chargeID: "ch_a_1")
        var viaSecond = PaymentLedger()
        viaSecond.recordSent(duplicate: true)
        viaSecond.recordCharge(pair: 1, chargeID: "ch_a_1")
        var merged = viaFirst
        merged.merge(viaSecond)
        #expect(merged.conflictingPairs.isEmpty)
        #expect(merged.charges.count == 1)
        // Without a shared store the second instance charges anew, under its own id.
        var chargedAgain = PaymentLedger()
        chargedAgain.recordCharge(pair: 1, chargeID: "ch_b_1")
        merged.merge(chargedAgain)
        #expect(merged.conflictingPairs == [1])
    }
}
