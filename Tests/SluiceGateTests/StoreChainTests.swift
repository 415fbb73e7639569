@testable import Sluice
import SluicePayment
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// Limit chains decided by a shared store: every instance counts the same rates and slots, a
/// request passes every stage or takes nothing from any, and a chain whose stages the store keeps
/// in several places is decided step by step with the same rollback.
@Suite struct StoreChainTests {
    /// A memory store that counts the calls of chains, and can keep each key in a place of its
    /// own (as Redis Cluster keeps keys in hash slots, so chains over several keys are decided
    /// step by step) and drop every renewal of slots (as an instance that stopped sends none).
    final class ObservedStore: SharedStore {
        let inner: MemoryStore
        let keyedPlaces: Bool
        let admits = Atomic<Int>(0)
        let givenBack = Atomic<Int>(0)
        let renewals = Atomic<Int>(0)
        let dropsRenewals = Atomic<Bool>(false)
        let failsAdmits = Atomic<Bool>(false)
        let holdsNextAdmit = Atomic<Bool>(false)
        private let heldAdmits = Mutex<[@Sendable () -> Void]>([])

        init(_ inner: MemoryStore, keyedPlaces: Bool = false) {
            self.inner = inner
            self.keyedPlaces = keyedPlaces
        }

        func place(of stage: StoreStage) -> Int? {
            keyedPlaces ? stage.key.utf8.reduce(0) { $0 &* 31 &+ Int($1) } : nil
        }

        func admit(
            _ stages: [StoreStage], cost: Int, owner: String, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void
        ) {
            admits.add(1, ordering: .relaxed)
            if holdsNextAdmit.exchange(false, ordering: .relaxed) {
                // Held back (as a slow network may), until the test lets it through.
                let inner = self.inner
                heldAdmits.withSanitizedLock { $0.append { inner.admit(stages, cost: cost, owner: owner, on: caller, completion) } }
                return
            }
            guard !failsAdmits.load(ordering: .relaxed) else {
                caller.execute { completion(.failure(StoreError(code: .timeout, message: "the chain's answer was lost"))) }
                return
            }
            inner.admit(stages, cost: cost, owner: owner, on: caller, completion)
        }

        /// Lets the decisions held back reach the store now.
        func letHeldAdmitsThrough() {
            let held = heldAdmits.withSanitizedLock { held in
                defer { held = [] }
                return held
            }
            for admit in held { admit() }
        }

        func giveBack(
            _ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
        ) {
            inner.giveBack(stages, admission: admission, cost: cost, owner: owner, on: caller) { [self] result in
                self.givenBack.add(1, ordering: .relaxed)
                completion(result)
            }
        }

        func renewSlots(
            _ stages: [StoreStage], owner: String, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
        ) {
            renewals.add(1, ordering: .relaxed)
            guard !dropsRenewals.load(ordering: .relaxed) else { return }
            inner.renewSlots(stages, owner: owner, on: caller, completion)
        }

        func throttle(
            _ key: StoreKey, interval: Duration, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Duration?, StoreError>) -> Void
        ) { inner.throttle(key, interval: interval, on: caller, completion) }

        func rateLimit(
            _ key: StoreKey, options: RateLimitOptions, cost: Int, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<RateLimitDecision, StoreError>) -> Void
        ) { inner.rateLimit(key, options: options, cost: cost, on: caller, completion) }

        func claim(
            _ record: StoreKey, fingerprint: String, owner: String, lease: Duration, retention: Duration, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<StoreClaim, StoreError>) -> Void
        ) { inner.claim(record, fingerprint: fingerprint, owner: owner, lease: lease, retention: retention, on: caller, completion) }

        func renew(
            _ record: StoreKey, lease: StoreLease, fingerprint: String, duration: Duration, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
        ) { inner.renew(record, lease: lease, fingerprint: fingerprint, duration: duration, on: caller, completion) }

        func complete(
            _ record: StoreKey, lease: StoreLease, fingerprint: String, result: [UInt8], retention: Duration,
            on caller: any StoreCaller, _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
        ) { inner.complete(record, lease: lease, fingerprint: fingerprint, result: result, retention: retention, on: caller, completion) }

        func release(
            _ record: StoreKey, lease: StoreLease, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
        ) { inner.release(record, lease: lease, on: caller, completion) }

        func isReachable(from caller: any StoreCaller) -> Bool { inner.isReachable(from: caller) }

        var given: Int { givenBack.load(ordering: .relaxed) }
        var admitted: Int { admits.load(ordering: .relaxed) }
    }

    typealias Fleet = StoreFleet<ObservedStore>

    private func makeFleet<Plugin: GatePlugin>(
        keyedPlaces: Bool = false, mode: StoreFailureMode = .closed, _ make: () throws -> Plugin
    ) throws -> (Fleet, PluginHandle<Plugin>, PluginHandle<Plugin>) {
        try Fleet.make(store: { ObservedStore($0, keyedPlaces: keyedPlaces) }, mode: mode, make)
    }

    private let minute = Duration.seconds(60)

    private func refusingStage<Output>(_ outcome: GateOutcome<Output>) -> String? {
        if case .limited(let refusal) = outcome { return refusal.stage }
        return nil
    }

    // MARK: - Through gates

    @Test func everyInstanceCountsTheSameRateAndSlotsAndARetrySpendsNothing() async throws {
        let processor = CountingProcessor(latency: .seconds(2))
        let (fleet, payA, payB) = try makeFleet {
            try PaymentPlugin(
                concurrent: .join,
                limits: try PaymentPlugin.accountLimits(rate: try RateLimitOptions(count: 1, per: minute, burst: 1), concurrency: 1),
                processor: processor)
        }
        defer { fleet.shutdown() }
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, .init(key: "acct", idem: "k1", amount: 10)))
        try await pollUntil { fleet.store.admitted == 1 }
        // The account's one slot is held in the store by the first instance.
        let refused = await fleet.b.gate.submit(payB, .init(key: "acct", idem: "k2", amount: 10))
        #expect(refusingStage(refused) == "pay-concurrency")
        await fleet.advance(by: .seconds(2))
        #expect(try await first.settledOutcome().kind == "ran")
        try await pollUntil { fleet.store.given >= 1 }
        // The slot is free; the account's rate counts the first instance's payment too.
        let ticket = await fleet.b.gate.start(fleet.b.gate.request(payB, .init(key: "acct", idem: "k3", amount: 10)))
        try await pollUntil { fleet.store.admitted == 3 }
        await fleet.advance(by: .seconds(2))
        let second = try await ticket.settledOutcome()
        #expect(second.kind == "ran")
        #expect(second.runInfo?.limits.first { $0.stage == "pay-rate" }?.decision.remaining == 0)
        try await pollUntil { fleet.store.given >= 2 }
        let third = await fleet.a.gate.submit(payA, .init(key: "acct", idem: "k4", amount: 10))
        #expect(refusingStage(third) == "pay-rate")
        // A retry replays on either instance, and spends nothing.
        #expect(await fleet.b.gate.submit(payB, .init(key: "acct", idem: "k1", amount: 10)).kind == "replayed")
        #expect(processor.charges.current == 2)
    }

    @Test func aChainInSeveralPlacesGivesBackWhatItsEarlierStepsTook() async throws {
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 0)
        let (fleet, a, b) = try makeFleet(keyedPlaces: true) {
            ProbePlugin(
                policy: .rateLimit(rate),
                limits: [try .rate("user-rate", rate) { $0.key }, try .concurrency("global", limit: 1) { _ in "all" }],
                sleeping(.seconds(1)))
        }
        defer { fleet.shutdown() }
        let first = await fleet.a.gate.start(fleet.a.gate.request(a, Probe(key: "u1", payload: "1")))
        try await pollUntil { fleet.store.admitted == 2 }
        // u2's policy and its rate are one step (one key), the global slot another, refused:
        // the first step is given back.
        let refused = await fleet.b.gate.submit(b, Probe(key: "u2", payload: "2"))
        #expect(refusingStage(refused) == "global")
        #expect(fleet.store.admitted == 4)
        if case .limited(let refusal) = refused {
            // Reported as it is once given back: its one unit is there again.
            #expect(refusal.reports.first { $0.stage == "user-rate" }?.decision.remaining == 1)
            #expect(refusal.reports.first { $0.stage == "user-rate" }?.decision.allowed == true)
        }
        try await pollUntil { fleet.store.given == 1 }
        await fleet.advance(by: .seconds(1))
        #expect(try await first.settledOutcome().kind == "ran")
        try await pollUntil { fleet.store.given == 2 }
        // Had the refused request kept its part, u2's policy (one per minute) would refuse now.
        let again = await fleet.b.gate.start(fleet.b.gate.request(b, Probe(key: "u2", payload: "3")))
        await fleet.advance(by: .seconds(1))
        #expect(try await again.settledOutcome().kind == "ran")
    }

    @Test func aThrottleRefusedByALaterStageOpensNoWindowInTheStore() async throws {
        let throttle = try ThrottleOptions(interval: .seconds(600))
        let rate = try RateLimitOptions(count: 1, per: minute, burst: 0)
        let (fleet, a, b) = try makeFleet {
            ProbePlugin(policy: .throttle(throttle), limits: [try .rate("global", rate) { _ in "all" }], immediate)
        }
        defer { fleet.shutdown() }
        #expect(await fleet.a.gate.submit(a, Probe(key: "a", payload: "a")).kind == "ran")
        #expect(refusingStage(await fleet.b.gate.submit(b, Probe(key: "b", payload: "b"))) == "global")
        await fleet.advance(by: minute)
        #expect(await fleet.a.gate.submit(a, Probe(key: "b", payload: "b")).kind == "ran")
        #expect(await fleet.b.gate.submit(b, Probe(key: "b", payload: "b")).kind == "throttled")
    }

    @Test func shadowStagesInTheStoreNeverRefuseAndAreCounted() async throws {
        let (fleet, a, b) = try makeFleet {
            ProbePlugin(
                policy: .rateLimit(try RateLimitOptions(count: 100, per: minute, burst: 100)),
                limits: [try .concurrency("slots", limit: 1, shadow: true) { _ in "all" }],
                sleeping(.seconds(1)))
        }
        defer { fleet.shutdown() }
        let first = await fleet.a.gate.start(fleet.a.gate.request(a, Probe(key: "x", payload: "1")))
        try await pollUntil { fleet.store.admitted == 1 }
        let second = await fleet.b.gate.start(fleet.b.gate.request(b, Probe(key: "y", payload: "2")))
        try await pollUntil { fleet.store.admitted == 2 }
        await fleet.advance(by: .seconds(1))
        #expect(try await first.settledOutcome().kind == "ran")
        #expect(try await second.settledOutcome().kind == "ran")
        #expect(await fleet.b.gate.statistics().shadowRefusals["probe"] == ["slots": 1])
    }

    @Test func aSlotIsRenewedWhileItsEffectRunsAndComesFreeWhenNoLongerRenewed() async throws {
        let (fleet, a, b) = try makeFleet {
            ProbePlugin(
                policy: .rateLimit(try RateLimitOptions(count: 100, per: minute, burst: 100)),
                limits: [try .concurrency("slots", limit: 1) { _ in "all" }], sleeping(.seconds(60)))
        }
        defer { fleet.shutdown() }
        _ = await fleet.a.gate.start(fleet.a.gate.request(a, Probe(key: "x", payload: "1")))
        try await pollUntil { fleet.store.admitted == 1 }
        // The slot's lease is ten seconds: renewed every third of it, it outlives it.
        for _ in 0..<30 {
            await fleet.advance(by: .seconds(1))
            try await pollUntil { fleet.store.inner.calls >= fleet.store.renewals.load(ordering: .relaxed) }
        }
        #expect(fleet.store.renewals.load(ordering: .relaxed) >= 8)
        #expect(refusingStage(await fleet.b.gate.submit(b, Probe(key: "y", payload: "2"))) == "slots")
        // The first instance stops renewing (as one that stopped would): the slot comes free.
        fleet.store.dropsRenewals.store(true, ordering: .relaxed)
        await fleet.advance(by: .seconds(11))
        let after = await fleet.b.gate.start(fleet.b.gate.request(b, Probe(key: "y", payload: "3")))
        try await pollUntil { fleet.store.admitted == 3 }
        await fleet.advance(by: .seconds(60))
        #expect(try await after.settledOutcome().kind == "ran")
    }

    @Test(arguments: [StoreFailureMode.closed, .local])
    func aChainTheStoreFailsToDecideRefusesOrDecidesHereAndGivesTheRecordBack(mode: StoreFailureMode) async throws {
        let processor = CountingProcessor(latency: .zero)
        let (fleet, payA, payB) = try makeFleet(mode: mode) {
            try PaymentPlugin(
                limits: try PaymentPlugin.accountLimits(rate: try RateLimitOptions(count: 1, per: minute, burst: 1), concurrency: 1),
                processor: processor)
        }
        defer { fleet.shutdown() }
        fleet.store.failsAdmits.store(true, ordering: .relaxed)
        let payment = PaymentPlugin.Payment(key: "acct", idem: "k1", amount: 10)
        let failed = await fleet.a.gate.submit(payA, payment)
        switch mode {
        case .closed:
            #expect(failed.kind == "unavailable")
            #expect(processor.charges.current == 0)
            // The record was given back: once the store decides chains again, the payment runs.
            fleet.store.failsAdmits.store(false, ordering: .relaxed)
            try await pollUntil { await fleet.b.gate.submit(payB, payment).kind == "ran" }
        default:
            // Decided by this instance's own chain, under the store's record.
            #expect(failed.kind == "ran")
            #expect(await fleet.b.gate.submit(payB, payment).kind == "replayed")
        }
        #expect(processor.charges.current == 1)
    }

    /// Two instances of an idempotent plugin with a 3 s lease and a chain, whose first request
    /// (`first`, on `a`) has its claim granted and its chain's answer held back (a slow store)
    /// while the lease runs out.
    private func fleetWithALateChainAnswer(effect: Duration) async throws
        -> (Fleet, PluginHandle<ProbePlugin<String>>, PluginHandle<ProbePlugin<String>>, GateTicket<String>)
    {
        let (fleet, a, b) = try makeFleet {
            ProbePlugin(
                policy: .idempotent(try IdempotencyOptions(retention: .seconds(600), lease: .seconds(3), concurrent: .join)),
                limits: [try .rate("r", try RateLimitOptions(count: 100, per: minute, burst: 100)) { $0.key }],
                sleeping(effect))
        }
        fleet.store.holdsNextAdmit.store(true, ordering: .relaxed)
        let first = await fleet.a.gate.start(fleet.a.gate.request(a, Probe(key: "k", payload: "p")))
        try await pollUntil { fleet.store.admitted == 1 }
        await fleet.advance(by: .seconds(4))
        return (fleet, a, b, first)
    }

    /// A claim granted, then its chain's answer late: by then the record's lease ran out and
    /// another instance claimed it and ran the effect. The late answer starts nothing.
    @Test func aChainAnsweredAfterTheLeaseRanOutStartsNothing() async throws {
        let (fleet, a, b, first) = try await fleetWithALateChainAnswer(effect: .seconds(5))
        defer { fleet.shutdown() }
        let second = await fleet.b.gate.start(fleet.b.gate.request(b, Probe(key: "k", payload: "p")))
        try await pollUntil { fleet.store.admitted == 2 }
        fleet.store.letHeldAdmitsThrough()
        try await pollUntil { first.resolvedOutcome != nil || a.plugin.counts.startedCount > 0 }
        for _ in 0..<6 { await fleet.advance(by: .seconds(1)) }
        #expect(try await first.settledOutcome().kind == "unavailable")
        #expect(try await second.settledOutcome().kind == "ran")
        #expect(b.plugin.counts.startedCount + a.plugin.counts.startedCount == 1)
    }

    /// The same, with the record taken again by a duplicate on this instance: the late request
    /// joins that execution, as a duplicate does, and the effect runs once.
    @Test func aChainAnsweredAfterThisInstanceTookTheRecordAgainJoinsIt() async throws {
        let (fleet, a, _, first) = try await fleetWithALateChainAnswer(effect: .seconds(2))
        defer { fleet.shutdown() }
        let second = await fleet.a.gate.start(fleet.a.gate.request(a, Probe(key: "k", payload: "p")))
        try await pollUntil { a.plugin.counts.startedCount == 1 }
        fleet.store.letHeldAdmitsThrough()
        try await pollUntil { fleet.store.given >= 1 }
        for _ in 0..<3 { await fleet.advance(by: .seconds(1)) }
        #expect(try await second.settledOutcome().runInfo?.source == .executed)
        #expect(try await first.settledOutcome().runInfo?.source == .joined)
        #expect(a.plugin.counts.startedCount == 1)
    }

    @Test func aShadowSlotIsRenewedWhileItsEffectRuns() async throws {
        let (fleet, a, b) = try makeFleet {
            ProbePlugin(
                policy: .rateLimit(try RateLimitOptions(count: 100, per: minute, burst: 100)),
                limits: [try .concurrency("slots", limit: 1, shadow: true) { _ in "all" }], sleeping(.seconds(60)))
        }
        defer { fleet.shutdown() }
        _ = await fleet.a.gate.start(fleet.a.gate.request(a, Probe(key: "x", payload: "1")))
        try await pollUntil { fleet.store.admitted == 1 }
        // Past the slot's ten-second lease: renewed, the shadow slot still counts.
        for _ in 0..<20 {
            await fleet.advance(by: .seconds(1))
            try await pollUntil { fleet.store.inner.calls >= fleet.store.renewals.load(ordering: .relaxed) }
        }
        let second = await fleet.b.gate.start(fleet.b.gate.request(b, Probe(key: "y", payload: "2")))
        try await pollUntil { fleet.store.admitted == 2 }
        await fleet.advance(by: .seconds(60))
        #expect(try await second.settledOutcome().kind == "ran")
        #expect(await fleet.b.gate.statistics().shadowRefusals["probe"] == ["slots": 1])
    }

    // MARK: - The steps' state machine

    @Test func stagesInOnePlaceAreOneStep() {
        #expect(StagedStoreAdmission(places: [nil, nil, nil]).steps == [0..<3])
        #expect(StagedStoreAdmission(places: [1, 1, 2, 1]).steps == [0..<2, 2..<3, 3..<4])
        #expect(StagedStoreAdmission(places: []).steps.isEmpty)
    }

    @Test func aRefusalInALaterStepGivesBackEveryEarlierStep() throws {
        var staged = StagedStoreAdmission(places: [1, 1, 2, 3])
        let rate = RateLimitDecision(allowed: true, limit: 2, remaining: 1, retryAfter: nil, resetAfter: .seconds(30))
        let first = StoreAdmission(result: .admitted, verdicts: [.stage(.rate(rate)), .stage(.rate(rate))], hold: hold([0, 1]))
        guard case .ask(let range) = staged.first, range == 0..<2 else { Issue.record("first step"); return }
        guard case .ask(let second) = staged.answered(.success(first)), second == 2..<3 else { Issue.record("second step"); return }
        let slot = StoreAdmission(
            result: .admitted, verdicts: [.stage(.concurrency(limit: 1, inFlight: 1, allowed: true))], hold: hold([0]))
        guard case .ask(let third) = staged.answered(.success(slot)), third == 3..<4 else { Issue.record("third step"); return }
        let refused = StoreAdmission(result: .refused(stage: 0), verdicts: [.stage(.concurrency(limit: 1, inFlight: 1, allowed: false))])
        guard case .decided(let admission, let giveBack) = staged.answered(.success(refused)) else {
            Issue.record("decided")
            return
        }
        #expect(admission.result == .refused(stage: 3))
        #expect(admission.verdicts.count == 4)
        #expect(admission.hold.isEmpty)
        #expect(giveBack.map(\.range) == [0..<2, 2..<3])
        #expect(giveBack.map(\.admission) == [first, slot])
    }

    @Test func aFailureGivesBackTheEarlierStepsAndAnAdmissionHoldsEveryStep() {
        var failing = StagedStoreAdmission(places: [1, 2])
        let slot = StoreAdmission(
            result: .admitted, verdicts: [.stage(.concurrency(limit: 1, inFlight: 1, allowed: true))], hold: hold([0]))
        _ = failing.answered(.success(slot))
        guard case .failed(_, let step, let giveBack) = failing.answered(.failure(StoreError(code: .timeout, message: "slow")))
        else {
            Issue.record("failed")
            return
        }
        // The failed step's slots are freed too: its answer may be lost while its change landed.
        #expect(step == 1..<2)
        #expect(giveBack.map(\.range) == [0..<1])
        var admitted = StagedStoreAdmission(places: [1, 2])
        _ = admitted.answered(.success(slot))
        let shadow = StoreAdmission(
            result: .admitted, verdicts: [.stage(.concurrency(limit: 1, inFlight: 1, allowed: false))], shadowRefusals: [0])
        guard case .decided(let admission, let none) = admitted.answered(.success(shadow)) else {
            Issue.record("decided")
            return
        }
        #expect(admission.result == .admitted && none.isEmpty)
        #expect(admission.hold == hold([0]))
        #expect(admission.shadowRefusals == [1])
    }

    private func hold(_ stages: [Int]) -> ChainHold {
        var hold = ChainHold()
        for stage in stages { hold.insert(stage) }
        return hold
    }
}
