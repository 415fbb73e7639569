import Sluice
import SluiceCore
import SluiceLibevent
import SluicePayment
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// Exactly-once when an owner pauses past its lease or the store loses its data: two instances
/// (two gates) share a store, each on a clock of its own, so that one can stand still (a paused
/// process) while the store's and the other's move. The processors share a ledger unless a
/// test says otherwise.
@Suite struct FencedPaymentTests {
    /// A gate that stops its processor's charge between the commit guard and the ledger call,
    /// until ``release()``: a process stalled past its guard.
    final class Stall: Sendable {
        private let latch = TestLatch()
        private let reachedRecord = Mutex<EffectRecord?>(nil)

        var reached: EffectRecord? { reachedRecord.withSanitizedLock { $0 } }

        func wait(_ record: EffectRecord) async {
            reachedRecord.withSanitizedLock { $0 = record }
            await latch.wait()
        }

        func release() { latch.open() }
    }

    /// Two instances of the payment plugin on one store, each gate on its own manual clock; the
    /// store (and the ledger) on a third.
    struct Fleet: Sendable {
        let a: GateHarness
        let b: GateHarness
        let payA: PluginHandle<PaymentPlugin>
        let payB: PluginHandle<PaymentPlugin>
        let processorA: SimulatedProcessor
        let processorB: SimulatedProcessor
        let store: MemoryStore
        let storeClock: ManualGateClock
        let ledger: MemoryChargeLedger?

        /// Time passes for the store and for `b`; `a` stands still (paused).
        func advanceAllButA(by duration: Duration) async {
            await storeClock.advance(by: duration)
            await b.advance(by: duration)
        }

        func shutdown() {
            a.shutdown()
            b.shutdown()
            storeClock.cancelAll()
        }
    }

    static let retention = Duration.seconds(10)

    private func makeFleet(
        latency: Duration, lease: Duration, ledger withLedger: Bool = true, stallA: Stall? = nil
    ) throws -> Fleet {
        let storeClock = ManualGateClock()
        let store = MemoryStore(now: { storeClock.now })
        let ledger = withLedger ? MemoryChargeLedger(now: { storeClock.now }) : nil
        var beforeCall: (@Sendable (EffectRecord) async -> Void)?
        if let stallA { beforeCall = { record in await stallA.wait(record) } }
        let processorA = SimulatedProcessor(latency: latency, ledger: ledger, beforeCall: beforeCall)
        let processorB = SimulatedProcessor(latency: latency, ledger: ledger)
        let shared = try PluginStore.shared(store, instances: 2)
        var pluginsA = PluginRegistry()
        var pluginsB = PluginRegistry()
        let payA = try pluginsA.register(
            try PaymentPlugin(retention: Self.retention, lease: lease, processor: processorA), store: shared)
        let payB = try pluginsB.register(
            try PaymentPlugin(retention: Self.retention, lease: lease, processor: processorB), store: shared)
        return Fleet(
            a: try GateHarness(plugins: pluginsA), b: try GateHarness(plugins: pluginsB), payA: payA, payB: payB,
            processorA: processorA, processorB: processorB, store: store, storeClock: storeClock, ledger: ledger)
    }

    /// The owner passes its guard, then stalls before its call; its lease runs out and the other
    /// instance takes the record over and charges. The late call carries the older fence: the
    /// ledger refuses it as stale, nothing more is charged, and the stalled owner answers its
    /// caller with the new owner's charge, as a duplicate would be answered.
    @Test func theLedgerRefusesAStalledOwnersLateCallAndItAnswersWithTheNewCharge() async throws {
        let stall = Stall()
        let fleet = try makeFleet(latency: .zero, lease: .seconds(1), stallA: stall)
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "order-1", amount: 500)
        let first = await fleet.a.gate.start(fleet.a.gate.request(fleet.payA, payment))
        try await pollUntil { stall.reached != nil }
        let staleRecord = try #require(stall.reached)
        #expect(staleRecord.downstreamKey == "pay:4:acctorder-1")
        // A's lease runs out by the store's clock; B takes the record over and charges.
        await fleet.advanceAllButA(by: .seconds(2))
        let taken = await fleet.b.gate.submit(fleet.payB, payment)
        guard case .ran(.charged(let charge), let info) = taken else {
            Issue.record("expected B to charge, got \(taken.kind)")
            return
        }
        #expect(info.source == .executed)
        // A wakes and makes its call: stale.
        stall.release()
        let late = try await first.settledOutcome()
        guard case .ran(let output, let lateInfo) = late else {
            Issue.record("expected A to answer with B's charge, got \(late.kind)")
            return
        }
        #expect(output.chargeID == charge)
        #expect(lateInfo.source == .replayed)
        #expect(fleet.processorA.stale.current == 1)
        #expect(fleet.processorA.payments.current == 0)
        #expect(fleet.processorB.payments.current == 1)
        #expect(fleet.ledger?.count == 1)
        #expect(fleet.ledger?.charge(of: staleRecord.downstreamKey) == charge)
    }

    /// The same stall the other way round: the stalled owner's call lands first (B has claimed
    /// the record but not called yet). The ledger charges A; B's call, with the newer fence, gets
    /// A's charge back, answered as a replay: still one charge.
    @Test func aNewerOwnersCallGetsTheChargeAnOlderCallMade() async throws {
        let fleet = try makeFleet(latency: .seconds(1), lease: .seconds(1))
        defer { fleet.shutdown() }
        let ledger = try #require(fleet.ledger)
        let payment = PaymentPlugin.Payment(key: "acct", idem: "order-2", amount: 5)
        let older = FencingToken(epoch: 1, counter: 1)
        #expect(try await ledger.charge(
            LedgerCall(record: "pay:4:acctorder-2", fence: older, amount: 5, chargeID: "ch_a"), on: fleet.b.group.loops[0])
            == .charged("ch_a"))
        let outcome = await fleet.b.gate.start(fleet.b.gate.request(fleet.payB, payment))
        try await pollUntil { fleet.store.calls >= 1 }
        await fleet.b.settle()
        await fleet.advanceAllButA(by: .seconds(1))
        let answer = try await outcome.settledOutcome()
        guard case .ran(.alreadyCharged("ch_a"), let info) = answer else {
            Issue.record("expected the earlier charge back, got \(answer.kind)")
            return
        }
        #expect(info.source == .executed)
        #expect(fleet.processorB.payments.current == 0)
        #expect(fleet.processorB.returned.current == 1)
        #expect(ledger.count == 1)
    }

    /// Without a ledger: a 3 s payment with a 900 ms lease whose owner is stopped 0.3 s in for
    /// 3 s. The other instance takes the record over and charges; when the owner wakes, its
    /// commit guard (or the store's word that its lease is lost) stops it before it charges, and
    /// it answers its caller with the other instance's charge: one charge in all.
    @Test(arguments: [false, true]) func anOwnerThatWakesPastItsLeaseDoesNotCharge(ledger: Bool) async throws {
        let fleet = try makeFleet(latency: .seconds(3), lease: .milliseconds(900), ledger: ledger)
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "order-3", amount: 7)
        let first = await fleet.a.gate.start(fleet.a.gate.request(fleet.payA, payment))
        try await pollUntil { fleet.store.calls >= 1 }
        // 0.3 s in, everyone moves together (A renews at 300 ms).
        await fleet.storeClock.advance(by: .milliseconds(300))
        await fleet.b.advance(by: .milliseconds(300))
        await fleet.a.advance(by: .milliseconds(300))
        await fleet.a.settle()
        // A stops. The other instance's retry polls while A's record is running, then takes it
        // over once the lease has run out by the store's clock, and charges.
        let retry = await fleet.b.gate.start(fleet.b.gate.request(fleet.payB, payment))
        for _ in 0..<60 {
            await fleet.advanceAllButA(by: .milliseconds(100))
            await fleet.b.settle()
        }
        let taken = try await retry.settledOutcome()
        guard case .ran(.charged(let charge), _) = taken else {
            Issue.record("expected B to charge, got \(taken.kind)")
            return
        }
        // A wakes 3 s later: its sleep ends and its renewals are answered.
        await fleet.a.advance(by: .seconds(3))
        for _ in 0..<10 {
            await fleet.a.advance(by: .milliseconds(100))
            await fleet.a.settle()
        }
        let woken = try await first.settledOutcome()
        guard case .ran(let output, let info) = woken else {
            Issue.record("expected A to answer with B's charge, got \(woken.kind)")
            return
        }
        #expect(output.chargeID == charge)
        #expect(info.source == .replayed)
        #expect(fleet.processorA.payments.current + fleet.processorB.payments.current == 1)
    }

    /// The store loses its data after a payment completed: the retry claims the record again
    /// (a greater fence, in a new epoch), and the ledger returns the charge it made, answered
    /// as a replay. Answers say the weaker guarantee for one retention.
    @Test func aStoreThatLostItsDataIsDetectedAndTheLedgerKeepsTheChargeSingle() async throws {
        let fleet = try makeFleet(latency: .zero, lease: .seconds(1))
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "order-4", amount: 9)
        let before = await fleet.a.gate.submit(fleet.payA, payment)
        guard case .ran(.charged(let charge), let info) = before else {
            Issue.record("expected a charge, got \(before.kind)")
            return
        }
        #expect(info.guarantee == .store)
        let epoch = fleet.store.epoch
        fleet.store.loseData()
        #expect(fleet.store.epoch > epoch)
        let retry = await fleet.a.gate.submit(fleet.payA, payment)
        guard case .ran(.alreadyCharged(let returned), let retryInfo) = retry else {
            Issue.record("expected the ledger's charge back, got \(retry.kind)")
            return
        }
        #expect(returned == charge)
        #expect(retryInfo.guarantee == .storeDataLost)
        // Its replay from the store (written again) says it too, as do new payments.
        let replay = await fleet.a.gate.submit(fleet.payA, payment)
        #expect(replay.kind == "replayed")
        #expect(replay.runInfo?.guarantee == .storeDataLost)
        #expect(await fleet.a.gate.submit(fleet.payA, .init(key: "acct", idem: "order-5", amount: 9)).runInfo?.guarantee == .storeDataLost)
        // The other instance had claimed nothing before the loss: it has no earlier epoch to
        // compare with, and answers with the full guarantee (an instance learns of a loss from
        // its own claims).
        #expect(await fleet.b.gate.submit(fleet.payB, .init(key: "acct", idem: "order-6", amount: 9)).runInfo?.guarantee == .store)
        #expect(fleet.processorA.payments.current == 2)
        #expect(fleet.processorA.returned.current == 1)
        // A retention later, answers carry the full guarantee again.
        await fleet.a.advance(by: Self.retention)
        #expect(await fleet.a.gate.submit(fleet.payA, .init(key: "acct", idem: "order-7", amount: 9)).runInfo?.guarantee == .store)
    }

    /// A running payment whose store loses its data: the owner's renewal finds its lease gone
    /// and stops it before it charges; its caller waits for the record, which is free, and runs
    /// it under a new fence: one charge.
    @Test func aRunningPaymentWhoseStoreLostItsDataIsChargedOnce() async throws {
        let fleet = try makeFleet(latency: .seconds(2), lease: .seconds(1))
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "order-8", amount: 3)
        let first = await fleet.a.gate.start(fleet.a.gate.request(fleet.payA, payment))
        try await pollUntil { fleet.store.calls >= 1 }
        fleet.store.loseData()
        for _ in 0..<60 {
            await fleet.storeClock.advance(by: .milliseconds(100))
            await fleet.a.advance(by: .milliseconds(100))
            await fleet.a.settle()
        }
        let outcome = try await first.settledOutcome()
        guard case .ran(.charged, let info) = outcome else {
            Issue.record("expected one charge, got \(outcome.kind)")
            return
        }
        #expect(info.guarantee == .storeDataLost)
        #expect(fleet.processorA.payments.current == 1)
    }

    /// The effect sees its record and fence; a record in this process's table gets a fence
    /// too, greater for every later execution of the same record.
    @Test func anEffectSeesItsRecordAndAFenceThatGrows() async throws {
        let seen = Mutex<[EffectRecord]>([])
        let processor = SimulatedProcessor(latency: .zero, ledger: MemoryChargeLedger(), beforeCall: { record in
            seen.withSanitizedLock { $0.append(record) }
        })
        var plugins = PluginRegistry()
        let pay = try plugins.register(try PaymentPlugin(retention: .seconds(10), processor: processor))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        #expect(await harness.gate.submit(pay, .init(key: "acct", idem: "i", amount: 1)).kind == "ran")
        await harness.advance(by: .seconds(11))
        // The record expired: the same pair runs again, and the ledger returns its charge.
        let again = await harness.gate.submit(pay, .init(key: "acct", idem: "i", amount: 1))
        #expect(again.output?.isAlreadyCharged == true)
        let records = seen.withSanitizedLock { $0 }
        #expect(records.count == 2)
        #expect(records.allSatisfy { $0.plugin == "pay" && $0.key == "acct" && $0.record == "4:accti" })
        #expect(records[0].fence < records[1].fence)
    }
}
