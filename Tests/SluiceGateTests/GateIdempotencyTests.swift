import Sluice
import SluicePayment
import SluicePluginTesting
import Synchronization
import Testing

/// A JSON-like result: nested arrays, a dictionary, optionals.
struct Receipt: Sendable, Hashable {
    struct Line: Sendable, Hashable {
        var sku: String
        var quantity: Int
        var tags: [String]
    }

    var id: String
    var lines: [Line]
    var metadata: [String: Int]
    var note: String?
}

/// A processor that takes `latency` on the gate's clock and counts its charges.
final class CountingProcessor: PaymentProcessor {
    let latency: Duration
    let charges = PluginCounter("test_charges")
    private let sequence = Atomic<Int>(0)

    init(latency: Duration) {
        self.latency = latency
    }

    func charge(_ payment: PaymentPlugin.Payment, context: EffectContext) async throws -> PaymentOutcome {
        try await context.sleep(for: latency)
        try Task.checkCancellation()
        charges.increment()
        return .charged("ch_\(sequence.wrappingAdd(1, ordering: .relaxed).newValue)")
    }

    var counters: [PluginCounter] { [charges] }
}

/// Idempotent plugins through the typed API.
@Suite struct GateIdempotencyTests {
    private func options(
        lease: Duration = .seconds(30), concurrent: IdempotencyOptions.Concurrent = .join, cacheErrors: Bool = true
    ) throws -> IdempotencyOptions {
        try IdempotencyOptions(retention: .seconds(3600), lease: lease, concurrent: concurrent, cacheErrors: cacheErrors)
    }

    /// The issue this gate was built to fix: a payment slower than its 30 s lease, duplicated
    /// after the lease ran out. The live owner is never taken over.
    @Test func aPaymentSlowerThanItsLeaseIsChargedOnce() async throws {
        let processor = CountingProcessor(latency: .seconds(60))
        var plugins = PluginRegistry()
        let pay = try plugins.register(PaymentPlugin(retention: .seconds(3600), processor: processor))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        let payment = PaymentPlugin.Payment(key: "acct", idem: "idem-1", amount: 500)
        let first = await gate.start(gate.request(pay, payment))
        await harness.advance(by: .seconds(31))  // the 30 s lease has run out; the owner still works
        let duplicate = await gate.start(gate.request(pay, payment))
        let otherAmount = await gate.submit(pay, PaymentPlugin.Payment(key: "acct", idem: "idem-1", amount: 501))
        #expect(otherAmount.kind == "mismatch")
        #expect(duplicate.resolvedOutcome == nil)
        await harness.advance(by: .seconds(29))
        let owner = try await first.settledOutcome()
        let joined = try await duplicate.settledOutcome()
        #expect(owner.kind == "ran")
        #expect(joined.kind == "joined")
        #expect(owner.output == joined.output)
        let replay = await gate.submit(pay, payment)
        #expect(replay.kind == "replayed" && replay.output == owner.output)
        #expect(await gate.submit(pay, PaymentPlugin.Payment(key: "acct", idem: "idem-1", amount: 501)).kind == "mismatch")
        #expect(processor.charges.current == 1)
    }

    /// One account's flood of new payments is refused at its quota, and only that account's:
    /// another account pays, and the flooding account's replays are still answered. The quota
    /// comes back with time (a GCRA over the retention).
    @Test func aFloodOfNewRecordsIsRefusedForThatKeyOnly() async throws {
        let processor = CountingProcessor(latency: .zero)
        var plugins = PluginRegistry()
        let pay = try plugins.register(PaymentPlugin(retention: .seconds(100), recordsPerKey: 3, processor: processor))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        func payment(_ key: String, _ idem: Int) -> PaymentPlugin.Payment {
            PaymentPlugin.Payment(key: key, idem: "i\(idem)", amount: 100)
        }
        var kinds: [String] = []
        for idem in 0..<5 { kinds.append(await gate.submit(pay, payment("flood", idem)).kind) }
        #expect(kinds == ["ran", "ran", "ran", "busy", "busy"])
        #expect(await gate.submit(pay, payment("other", 0)).kind == "ran")
        #expect(await gate.submit(pay, payment("flood", 0)).kind == "replayed")
        #expect(processor.charges.current == 4)
        // 3 more per 100 s: one record's worth after 34 s.
        await harness.advance(by: .seconds(34))
        #expect(await gate.submit(pay, payment("flood", 5)).kind == "ran")
        #expect(await gate.submit(pay, payment("flood", 6)).kind == "busy")
        #expect(throws: SluiceError.self) {
            try PaymentPlugin(recordsPerKey: 0, processor: CountingProcessor(latency: .zero))
        }
    }

    @Test func aTypedResultIsReplayedUnchanged() async throws {
        let receipt = Receipt(
            id: "r-1",
            lines: [Receipt.Line(sku: "a", quantity: 2, tags: ["x", "y"]), Receipt.Line(sku: "b", quantity: 1, tags: [])],
            metadata: ["attempt": 1, "region": 7],
            note: nil)
        var plugins = PluginRegistry()
        let plugin = ProbePlugin<Receipt>(policy: .idempotent(try options())) { _, _ in receipt }
        let probe = try plugins.register(plugin)
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let first = await harness.gate.submit(probe, Probe(key: "k", payload: "order-1", fingerprint: "f"))
        let replay = await harness.gate.submit(probe, Probe(key: "k", payload: "order-1", fingerprint: "f"))
        #expect(first.output == receipt && first.kind == "ran")
        #expect(replay.output == receipt && replay.kind == "replayed")
        #expect(plugin.counts.startedCount == 1)
    }

    @Test(arguments: [true, false])
    func aThrownErrorIsStoredOrReleasedAsTheOptionsSay(cacheErrors: Bool) async throws {
        var plugins = PluginRegistry()
        let plugin = ProbePlugin<String>(policy: .idempotent(try options(cacheErrors: cacheErrors))) { _, _ in
            throw ProbeError(code: 42)
        }
        let probe = try plugins.register(plugin)
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let request = Probe(key: "k", payload: "p", fingerprint: "f")
        guard case .failed(let error, let info) = await harness.gate.submit(probe, request) else {
            Issue.record("expected failed")
            return
        }
        #expect(error as? ProbeError == ProbeError(code: 42) && info.source == .executed)
        let again = await harness.gate.submit(probe, request)
        if cacheErrors {
            guard case .failed(let stored, let storedInfo) = again else {
                Issue.record("expected the stored error")
                return
            }
            #expect(stored as? ProbeError == ProbeError(code: 42) && storedInfo.source == .replayed)
            #expect(plugin.counts.startedCount == 1)
        } else {
            #expect(again.kind == "failed")
            #expect(plugin.counts.startedCount == 2)
        }
    }

    @Test func aFailureOutputIsReleasedWhenErrorsAreNotCached() async throws {
        var plugins = PluginRegistry()
        let plugin = ProbePlugin<String>(
            policy: .idempotent(try options(cacheErrors: false)), failure: { $0 == "declined" }, { probe, _ in probe.fingerprint })
        let probe = try plugins.register(plugin)
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        #expect(await harness.gate.submit(probe, Probe(key: "k", payload: "p", fingerprint: "declined")).kind == "ran")
        #expect(await harness.gate.submit(probe, Probe(key: "k", payload: "p", fingerprint: "declined")).kind == "ran")
        #expect(await harness.gate.submit(probe, Probe(key: "k", payload: "q", fingerprint: "ok")).kind == "ran")
        #expect(await harness.gate.submit(probe, Probe(key: "k", payload: "q", fingerprint: "ok")).kind == "replayed")
        #expect(plugin.counts.startedCount == 3)
    }

    @Test func duplicatesJoinOrAreRefusedAndOtherPayloadsMismatch() async throws {
        var plugins = PluginRegistry()
        let joining = try plugins.register(ProbePlugin("join", policy: .idempotent(try options()), sleeping(.seconds(1))))
        let refusing = try plugins.register(
            ProbePlugin("reject", policy: .idempotent(try options(concurrent: .reject)), sleeping(.seconds(1))))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        let request = Probe(key: "k", payload: "p", fingerprint: "f")
        let owner = await gate.start(gate.request(joining, request))
        let joiner = await gate.start(gate.request(joining, request))
        let refusedOwner = await gate.start(gate.request(refusing, request))
        #expect(await gate.submit(refusing, request).kind == "conflict")
        #expect(await gate.submit(joining, Probe(key: "k", payload: "p", fingerprint: "g")).kind == "mismatch")
        await harness.advance(by: .seconds(1))
        #expect(try await owner.settledOutcome().kind == "ran")
        #expect(try await joiner.settledOutcome().kind == "joined")
        #expect(try await refusedOwner.settledOutcome().kind == "ran")
    }

    @Test func aFullTableAnswersBusyAndKeepsWhatItHolds() async throws {
        var plugins = PluginRegistry()
        let probe = try plugins.register(ProbePlugin(policy: .idempotent(try options()), sleeping(.seconds(1))), budget: .entries(1))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        let held = await gate.start(gate.request(probe, Probe(key: "a", payload: "1", fingerprint: "f")))
        #expect(await gate.submit(probe, Probe(key: "b", payload: "2", fingerprint: "f")).kind == "busy")
        await harness.advance(by: .seconds(1))
        #expect(try await held.settledOutcome().kind == "ran")
        #expect(await gate.submit(probe, Probe(key: "a", payload: "1", fingerprint: "f")).kind == "replayed")
    }

    @Test func joinedDuplicatesAreBoundedByTheBudget() async throws {
        var plugins = PluginRegistry()
        let probe = try plugins.register(
            ProbePlugin(policy: .idempotent(try options()), sleeping(.seconds(1))), budget: .bytes(8 << 10))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        let request = Probe(key: "k", payload: "p", fingerprint: "f")
        var tickets: [GateTicket<String>] = []
        var busy = 0
        for _ in 0..<200 {
            let ticket = await gate.start(gate.request(probe, request))
            if ticket.resolvedOutcome?.kind == "busy" { busy += 1 } else { tickets.append(ticket) }
        }
        #expect(busy > 0)
        #expect(tickets.count > 1)
        await harness.advance(by: .seconds(1))
        for ticket in tickets { #expect(try await ticket.settledOutcome().output == "p") }
        // Once the waiters are answered their budget is free again.
        #expect(await gate.submit(probe, request).kind == "replayed")
        let statistics = await gate.statistics()
        #expect(statistics.waiters == 0 && statistics.executions == 0)
    }
}
