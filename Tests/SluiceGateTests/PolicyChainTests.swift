import Sluice
import SluicePayment
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// A plugin's policy followed by its limits, through the typed API on a manual clock: a request
/// passes every stage or takes nothing from any, and what its policy answers without running
/// (a replay, a join, a throttle) reaches no stage.
@Suite struct PolicyChainTests {
    private let minute = Duration.seconds(60)

    private func paymentHarness(limits: [LimitStage<PaymentPlugin.Payment>], latency: Duration = .seconds(1))
        throws -> (GateHarness, PluginHandle<PaymentPlugin>, CountingProcessor)
    {
        let processor = CountingProcessor(latency: latency)
        var plugins = PluginRegistry()
        let pay = try plugins.register(try PaymentPlugin(concurrent: .join, limits: limits, processor: processor))
        return (try GateHarness(plugins: plugins), pay, processor)
    }

    /// A harness running `probe` alone.
    private func probeHarness(_ probe: ProbePlugin<String>) throws -> (GateHarness, PluginHandle<ProbePlugin<String>>) {
        var plugins = PluginRegistry()
        let handle = try plugins.register(probe)
        return (try GateHarness(plugins: plugins), handle)
    }

    private func accountRate(limit: Int) throws -> RateLimitOptions {
        try RateLimitOptions(count: 1, per: minute, burst: limit - 1)
    }

    /// What the account's `pay-rate` stage reported for a payment that ran.
    private func remaining(_ outcome: GateOutcome<PaymentOutcome>) -> Int? {
        outcome.runInfo?.limits.first { $0.stage == "pay-rate" }?.decision.remaining
    }

    @Test func aRetriedOrDuplicatePaymentNeverSpendsTheAccountRate() async throws {
        let limits = try PaymentPlugin.accountLimits(rate: try accountRate(limit: 3), concurrency: nil)
        let (harness, pay, processor) = try paymentHarness(limits: limits)
        defer { harness.shutdown() }
        let gate = harness.gate
        let payment = PaymentPlugin.Payment(key: "acct", idem: "k1", amount: 100)
        let first = await gate.start(gate.request(pay, payment))
        // Duplicates while it runs join it; they spend nothing.
        let joined = await gate.start(gate.request(pay, payment))
        await harness.advance(by: .seconds(1))
        #expect(remaining(try await first.settledOutcome()) == 2)
        let join = try await joined.settledOutcome()
        #expect(join.runInfo?.source == .joined && join.runInfo?.limits == [])
        // Retries after it completed replay it; they spend nothing either.
        for _ in 0..<5 {
            let replay = await gate.submit(pay, payment)
            #expect(replay.runInfo?.source == .replayed && replay.runInfo?.limits == [])
        }
        // A mismatch reaches no stage.
        #expect(await gate.submit(pay, .init(key: "acct", idem: "k1", amount: 999)).kind == "mismatch")
        let second = await gate.start(gate.request(pay, .init(key: "acct", idem: "k2", amount: 100)))
        await harness.advance(by: .seconds(1))
        #expect(remaining(try await second.settledOutcome()) == 1)
        #expect(processor.charges.current == 2)
    }

    @Test func aPaymentRefusedByTheConcurrencyStageLeavesTheAccountRateAsItWas() async throws {
        let limits = try PaymentPlugin.accountLimits(rate: try accountRate(limit: 5), concurrency: 1)
        let (harness, pay, processor) = try paymentHarness(limits: limits)
        defer { harness.shutdown() }
        let gate = harness.gate
        let running = await gate.start(gate.request(pay, .init(key: "acct", idem: "p1", amount: 100)))
        // p1 spent one unit of five: four remain while it runs.
        guard case .limited(let refusal) = await gate.submit(pay, .init(key: "acct", idem: "p2", amount: 100)) else {
            Issue.record("the second payment should be refused by the concurrency stage")
            return
        }
        #expect(refusal.stage == "pay-concurrency")
        #expect(refusal.verdict == .concurrency(limit: 1, inFlight: 1, allowed: false))
        #expect(refusal.retryAfter == nil && refusal.limit == 1)
        // The rate stage reports its state after giving p2's unit back: as before p2.
        #expect(refusal.reports.map(\.stage) == ["pay-rate"])
        #expect(refusal.reports.first?.decision.remaining == 4)
        // Another account is not limited by this one's slot.
        let other = await gate.start(gate.request(pay, .init(key: "other", idem: "p1", amount: 100)))
        await harness.advance(by: .seconds(1))
        #expect(remaining(try await running.settledOutcome()) == 4)
        #expect(try await other.settledOutcome().kind == "ran")
        // The slot is free once p1 ended, and p2 spent nothing: its retry runs and leaves three.
        let retry = await gate.start(gate.request(pay, .init(key: "acct", idem: "p2", amount: 100)))
        await harness.advance(by: .seconds(1))
        let retried = try await retry.settledOutcome()
        #expect(retried.kind == "ran" && remaining(retried) == 3)
        #expect(processor.charges.current == 3)
    }

    @Test func aPaymentRefusedByTheRateStageStoresNoRecord() async throws {
        let limits = try PaymentPlugin.accountLimits(rate: try accountRate(limit: 1), concurrency: nil)
        let (harness, pay, processor) = try paymentHarness(limits: limits, latency: .zero)
        defer { harness.shutdown() }
        let gate = harness.gate
        #expect(await gate.submit(pay, .init(key: "acct", idem: "p1", amount: 100)).kind == "ran")
        guard case .limited(let refusal) = await gate.submit(pay, .init(key: "acct", idem: "p2", amount: 100)) else {
            Issue.record("the second payment should be limited")
            return
        }
        #expect(refusal.stage == "pay-rate")
        #expect(refusal.retryAfter == minute)
        // Nothing was stored for p2: even another amount under its key is not a mismatch.
        #expect(await gate.submit(pay, .init(key: "acct", idem: "p2", amount: 555)).kind == "limited")
        await harness.advance(by: minute)
        let ran = await gate.submit(pay, .init(key: "acct", idem: "p2", amount: 100))
        #expect(ran.kind == "ran" && ran.runInfo?.source == .executed)
        #expect(processor.charges.current == 2)
        let statistics = await gate.statistics()
        #expect(statistics.shadowRefusals.isEmpty)
    }

    @Test func shadowStagesNeverRefuseAndCountWhatTheyWouldHaveRefused() async throws {
        let limits: [LimitStage<PaymentPlugin.Payment>] = [
            try .rate("pay-rate", try accountRate(limit: 1), shadow: true) { $0.key },
            try .concurrency("pay-concurrency", limit: 1, shadow: true) { $0.key },
        ]
        let (harness, pay, processor) = try paymentHarness(limits: limits)
        defer { harness.shutdown() }
        let gate = harness.gate
        var tickets: [GateTicket<PaymentOutcome>] = []
        for idem in ["a", "b", "c"] {
            tickets.append(await gate.start(gate.request(pay, .init(key: "acct", idem: idem, amount: 100))))
        }
        await harness.advance(by: .seconds(1))
        for ticket in tickets { #expect(try await ticket.settledOutcome().kind == "ran") }
        #expect(processor.charges.current == 3)
        let statistics = await gate.statistics()
        #expect(statistics.shadowRefusals["pay"] == ["pay-rate": 2, "pay-concurrency": 2])
    }

    @Test func aRunALaterStageRefusesStartsNoThrottleWindow() async throws {
        // The throttle is per key, the rate stage global: a refused run leaves its key's window
        // closed, so the key runs as soon as the rate allows, long before its window would end.
        let throttle = try ThrottleOptions(interval: .seconds(600))
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 0)
        let probe = ProbePlugin(policy: .throttle(throttle), limits: [try .rate("global", rate) { _ in "all" }], immediate)
        let (harness, handle) = try probeHarness(probe)
        defer { harness.shutdown() }
        let gate = harness.gate
        #expect(await gate.submit(handle, Probe(key: "a", payload: "a")).kind == "ran")
        guard case .limited(let refusal) = await gate.submit(handle, Probe(key: "b", payload: "b")) else {
            Issue.record("the rate stage should refuse b")
            return
        }
        #expect(refusal.stage == "global")
        await harness.advance(by: minute)
        #expect(await gate.submit(handle, Probe(key: "b", payload: "b")).kind == "ran")
        #expect(await gate.submit(handle, Probe(key: "b", payload: "b")).kind == "throttled")
    }

    @Test func aRateLimitPolicyRefusedByAConcurrencyStageGetsItsUnitBack() async throws {
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 2)
        let probe = ProbePlugin(
            policy: .rateLimit(rate), limits: [try .concurrency("slots", limit: 1) { $0.key }], sleeping(.seconds(1)))
        let (harness, handle) = try probeHarness(probe)
        defer { harness.shutdown() }
        let gate = harness.gate
        let first = await gate.start(gate.request(handle, Probe(key: "k", payload: "1")))
        #expect(await gate.submit(handle, Probe(key: "k", payload: "2")).kind == "limited")
        await harness.advance(by: .seconds(1))
        #expect(try await first.settledOutcome().runInfo?.rateLimit?.remaining == 2)
        let third = await gate.start(gate.request(handle, Probe(key: "k", payload: "3")))
        await harness.advance(by: .seconds(1))
        // The refused request's unit came back: one spent by the first, one by this one.
        #expect(try await third.settledOutcome().runInfo?.rateLimit?.remaining == 1)
    }

    @Test func aSupersededHeldRequestGivesBackWhatItTook() async throws {
        let debounce = try DebounceOptions(quiet: .milliseconds(100))
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 0)
        let probe = ProbePlugin(
            policy: .debounce(debounce, cancelInFlight: false), limits: [try .rate("searches", rate) { $0.key }], immediate)
        let (harness, handle) = try probeHarness(probe)
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(handle, Probe(key: "box", payload: "a")))
        let b = await gate.start(gate.request(handle, Probe(key: "box", payload: "b")))
        #expect(try await a.settledOutcome().kind == "superseded")
        await harness.advance(by: .milliseconds(100))
        #expect(try await b.settledOutcome().output == "b")
        // Only b spent the key's one unit.
        #expect(await gate.submit(handle, Probe(key: "box", payload: "c")).kind == "limited")
    }
    @Test func eachAdmittedRequestKeepsItsOwnReportsWhileOthersAreAdmitted() async throws {
        // The lane writes an admitted request's reports into a buffer it reuses: an outcome
        // kept by its caller, or an execution still running, must never see a later request's.
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 3)
        let probe = ProbePlugin(policy: .unrestricted, limits: [try .rate("all", rate) { _ in "all" }], sleeping(.seconds(1)))
        let (harness, handle) = try probeHarness(probe)
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(handle, Probe(key: "a", payload: "a")))
        let b = await gate.start(gate.request(handle, Probe(key: "b", payload: "b")))
        await harness.advance(by: .seconds(1))
        let first = try await a.settledOutcome()
        let second = try await b.settledOutcome()
        #expect(first.runInfo?.limits.map(\.decision.remaining) == [3])
        #expect(second.runInfo?.limits.map(\.decision.remaining) == [2])
        // Run in place: the first outcome is still held when the next two are admitted.
        var plugins = PluginRegistry()
        let inPlace = try plugins.register(InPlaceLimitedPlugin(limits: [try .rate("all", rate) { _ in "all" }]))
        let local = try GateHarness(plugins: plugins)
        defer { local.shutdown() }
        let kept = await local.gate.submit(inPlace, "x")
        let next = await local.gate.submit(inPlace, "y")
        let last = await local.gate.submit(inPlace, "z")
        #expect(kept.runInfo?.limits.map(\.decision.remaining) == [3])
        #expect(next.runInfo?.limits.map(\.decision.remaining) == [2])
        #expect(last.runInfo?.limits.map(\.decision.remaining) == [1])
    }

    @Test func aStageKeyedCoarserThanThePluginCountsTheRequestsOfEveryShard() async throws {
        // Keys spread over two loops; the stages count every request under one key ("all"):
        // the whole gate admits the stage's limit, not each shard.
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 3)
        var plugins = PluginRegistry()
        let inPlace = try plugins.register(InPlaceLimitedPlugin(limits: [try .rate("all", rate) { _ in "all" }]))
        let probe = try plugins.register(
            ProbePlugin(policy: .unrestricted, limits: [try .concurrency("slots", limit: 2) { _ in "all" }], sleeping(.seconds(1))))
        let harness = try GateHarness(plugins: plugins, loops: 2)
        defer { harness.shutdown() }
        let gate = harness.gate
        let keys = (0..<40).map { "account-\($0)" }
        #expect(Set(keys.map { gate.shardIndex(forKey: $0) }) == [0, 1], "the keys span both shards")
        var ran = 0
        for key in keys where await gate.submit(inPlace, key).kind == "ran" { ran += 1 }
        #expect(ran == 4)
        let started = await withTaskGroup(of: GateTicket<String>.self) { group in
            for key in keys.prefix(10) {
                group.addTask { await gate.start(gate.request(probe, Probe(key: key, payload: key))) }
            }
            var tickets: [GateTicket<String>] = []
            for await ticket in group { tickets.append(ticket) }
            return tickets
        }
        await harness.settle()
        var statistics = await gate.statistics()
        #expect(statistics.executions == 2)
        // Each stage's key is counted once, however many shards share its table.
        #expect(statistics.keysByPlugin["in-place"] == 1)
        await harness.advance(by: .seconds(1))
        var kinds: [String: Int] = [:]
        for ticket in started { kinds[try await ticket.settledOutcome().kind, default: 0] += 1 }
        #expect(kinds == ["ran": 2, "limited": 8])
        statistics = await gate.statistics()
        #expect(statistics.executions == 0)
    }
}

/// A plugin whose effect runs in place (``GatePlugin/runImmediately(_:context:)``), behind the
/// limits it is given.
private struct InPlaceLimitedPlugin: GatePlugin {
    let name = "in-place"
    let policy = GatePolicy.unrestricted
    let limits: [LimitStage<String>]

    func key(for input: String) -> String { input }

    func run(_ input: String, context: EffectContext) async throws -> String { input }

    func runImmediately(_ input: String, context: EffectContext) throws -> String? { input }
}
