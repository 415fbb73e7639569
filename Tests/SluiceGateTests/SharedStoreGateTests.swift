import Sluice
import SluiceButtonTap
import SluicePayment
import SluicePluginTesting
import SluiceRateLimit
import SluiceSearch
import SluiceTestSupport
import Testing

/// Two gates (two instances) sharing one store: what one decides, the other sees. The store is
/// the in-memory reference implementation on the first harness's manual clock; the Redis store
/// runs the same protocol (its own suite).
@Suite struct SharedStoreGateTests {
    typealias Fleet = StoreFleet<MemoryStore>

    private func makeFleet<Plugin: GatePlugin>(
        _ make: () throws -> Plugin, mode: StoreFailureMode = .closed, instances: Int = 2
    ) throws -> (Fleet, PluginHandle<Plugin>, PluginHandle<Plugin>) {
        try Fleet.make(store: { $0 }, mode: mode, instances: instances, make)
    }

    @Test func aDuplicateOnAnotherInstanceJoinsByPollingAndIsChargedOnce() async throws {
        let processor = CountingProcessor(latency: .seconds(2))
        let (fleet, payA, payB) = try makeFleet { try PaymentPlugin(processor: processor) }
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "k1", amount: 700)
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, payment))
        try await pollUntil { processor.charges.current == 0 && fleet.store.calls == 1 }
        let duplicate = await fleet.b.gate.start(fleet.b.gate.request(payB, payment))
        try await pollUntil { fleet.store.calls >= 2 }
        #expect(duplicate.resolvedOutcome == nil)
        // The owner finishes; the duplicate's next poll finds the stored result.
        for _ in 0..<10 { await fleet.advance(by: .milliseconds(500)); await fleet.settle() }
        let owner = try await first.settledOutcome()
        let joined = try await duplicate.settledOutcome()
        #expect(owner.kind == "ran")
        #expect(joined.kind == "replayed")
        #expect(owner.output == joined.output)
        #expect(await fleet.b.gate.submit(payB, payment).output == owner.output)
        #expect(await fleet.b.gate.submit(payB, .init(key: "acct", idem: "k1", amount: 701)).kind == "mismatch")
        #expect(processor.charges.current == 1)
    }

    @Test func aDuplicateOnAnotherInstanceIsAConflictWhenItRejects() async throws {
        let processor = CountingProcessor(latency: .seconds(2))
        let (fleet, payA, payB) = try makeFleet { try PaymentPlugin(processor: processor) }
        defer { fleet.shutdown() }
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, .init(key: "acct", idem: "k2", amount: 5)))
        try await pollUntil { fleet.store.calls == 1 }
        let rejected = await fleet.b.gate.submit(payB, .init(key: "acct", idem: "k2", amount: 5, concurrent: .reject))
        #expect(rejected.kind == "conflict")
        await fleet.advance(by: .seconds(2))
        #expect(try await first.settledOutcome().kind == "ran")
        try await pollUntil { await fleet.b.gate.submit(payB, .init(key: "acct", idem: "k2", amount: 5)).kind == "replayed" }
        #expect(processor.charges.current == 1)
    }

    /// A payment slower than its lease: the owner's heartbeat keeps the record, so the duplicate
    /// on the other instance never takes it over.
    @Test func aPaymentSlowerThanItsLeaseIsRenewedAndChargedOnce() async throws {
        let processor = CountingProcessor(latency: .seconds(75))
        let (fleet, payA, payB) = try makeFleet { try PaymentPlugin(processor: processor) }
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "slow", amount: 1)
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, payment))
        try await pollUntil { fleet.store.calls == 1 }
        for _ in 0..<9 { await fleet.advance(by: .seconds(5)); await fleet.settle() }  // 45 s > the 30 s lease
        #expect(await fleet.b.gate.submit(payB, .init(key: "acct", idem: "slow", amount: 1, concurrent: .reject)).kind == "conflict")
        for _ in 0..<7 { await fleet.advance(by: .seconds(5)); await fleet.settle() }
        #expect(try await first.settledOutcome().kind == "ran")
        try await pollUntil { await fleet.b.gate.submit(payB, payment).kind == "replayed" }
        #expect(processor.charges.current == 1)
    }

    @Test func aThrottleIsSharedAcrossInstances() async throws {
        let (fleet, tapA, tapB) = try makeFleet { try ButtonTapPlugin(window: .seconds(1)) }
        defer { fleet.shutdown() }
        #expect(await fleet.a.gate.submit(tapA, "user").kind == "ran")
        let throttled = await fleet.b.gate.submit(tapB, "user")
        guard case .throttled(let retryAfter) = throttled else {
            Issue.record("expected throttled, got \(throttled.kind)")
            return
        }
        #expect(retryAfter == .seconds(1))
        #expect(await fleet.b.gate.submit(tapB, "other").kind == "ran")
        await fleet.advance(by: .seconds(1))
        #expect(await fleet.b.gate.submit(tapB, "user").kind == "ran")
    }

    @Test func aRequestTheStoreLetThroughRunsUnderTheRegistrationItWaitedWith() async throws {
        // The request waited for the store as a waiter in its caller's scope; it runs as that
        // waiter's execution, so closing the scope cancels it, and nothing is left behind.
        let throttle = try ThrottleOptions(interval: .seconds(60))
        let (fleet, probeA, _) = try makeFleet { ProbePlugin(policy: .throttle(throttle), sleeping(.seconds(1))) }
        defer { fleet.shutdown() }
        let gate = fleet.a.gate
        let scope = gate.openScope()
        let cancelled = await gate.start(gate.request(probeA, Probe(key: "a", payload: "a"), in: scope))
        await fleet.settle()
        var statistics = await gate.statistics()
        #expect(statistics.executions == 1 && statistics.waiters == 1)
        gate.close(scope)
        await fleet.settle()
        // Checked before awaiting it: a request the scope did not reach would never be answered.
        statistics = await gate.statistics()
        guard statistics.executions == 0 && statistics.waiters == 0 else {
            Issue.record("closing the scope left \(statistics.executions) executions, \(statistics.waiters) waiters")
            return
        }
        #expect(try await cancelled.settledOutcome().kind == "cancelled(scopeClosed)")
        let ran = await gate.start(gate.request(probeA, Probe(key: "b", payload: "b")))
        await fleet.settle()
        await fleet.advance(by: .seconds(1))
        #expect(try await ran.settledOutcome().output == "b")
        statistics = await gate.statistics()
        #expect(statistics.executions == 0 && statistics.waiters == 0)
        #expect(probeA.plugin.counts.cancelledCount == 1 && probeA.plugin.counts.finishedCount == 1)
    }

    @Test func aPaymentTheStoreLetRunAndItsDuplicateWaitUnderTheRegistrationsTheyWaitedWith() async throws {
        // Both waited for the store as waiters in their callers' scopes. The first leads the
        // execution and the second joins it as those same waiters: closing a caller's scope
        // answers that caller, and the payment runs on and is stored. Nothing is left behind.
        let processor = CountingProcessor(latency: .seconds(1))
        let (fleet, payA, _) = try makeFleet({ try PaymentPlugin(processor: processor) })
        defer { fleet.shutdown() }
        let gate = fleet.a.gate
        let payment = PaymentPlugin.Payment(key: "acct", idem: "scoped", amount: 3)
        let first = gate.openScope()
        let second = gate.openScope()
        let leader = await gate.start(gate.request(payA, payment, in: first))
        await fleet.settle()
        let duplicate = await gate.start(gate.request(payA, payment, in: second))
        await fleet.settle()
        var statistics = await gate.statistics()
        #expect(statistics.executions == 1 && statistics.waiters == 2)
        gate.close(first)
        await fleet.settle()
        statistics = await gate.statistics()
        guard statistics.executions == 1 && statistics.waiters == 1 else {
            Issue.record("closing the leader's scope left \(statistics.executions) executions, \(statistics.waiters) waiters")
            return
        }
        #expect(try await leader.settledOutcome().kind == "cancelled(scopeClosed)")
        await fleet.advance(by: .seconds(1))
        #expect(try await duplicate.settledOutcome().kind == "joined")
        statistics = await gate.statistics()
        #expect(statistics.executions == 0 && statistics.waiters == 0)
        let retry = await gate.submit(payA, payment)
        #expect(retry.kind == "replayed")
        #expect(processor.charges.current == 1)
        gate.close(second)
    }

    @Test func aRateLimitIsSharedAcrossInstances() async throws {
        let (fleet, limitA, limitB) = try makeFleet { try RateLimitPlugin(count: 1, per: .seconds(1), burst: 2) }
        defer { fleet.shutdown() }
        var remaining: [Int] = []
        for index in 0..<3 {
            let gate = index.isMultiple(of: 2) ? fleet.a.gate : fleet.b.gate
            let handle = index.isMultiple(of: 2) ? limitA : limitB
            let outcome = await gate.submit(handle, .init(key: "api"))
            remaining.append(outcome.runInfo?.rateLimit?.remaining ?? -1)
        }
        #expect(remaining == [2, 1, 0])
        guard case .limited(let decision) = await fleet.b.gate.submit(limitB, .init(key: "api")) else {
            Issue.record("the fourth request across both instances should be limited")
            return
        }
        #expect(decision.retryAfter == .seconds(1))
    }

    @Test func closedRefusesWhileTheStoreIsDownAndRecoversByItself() async throws {
        let processor = CountingProcessor(latency: .zero)
        let (fleet, payA, _) = try makeFleet { try PaymentPlugin(processor: processor) }
        defer { fleet.shutdown() }
        fleet.store.setAvailable(false)
        #expect(await fleet.a.gate.submit(payA, .init(key: "acct", idem: "d1", amount: 3)).kind == "unavailable")
        fleet.store.setAvailable(true)
        #expect(await fleet.a.gate.submit(payA, .init(key: "acct", idem: "d1", amount: 3)).kind == "ran")
        #expect(processor.charges.current == 1)
    }

    @Test func openLetsLimitsThroughButNeverAPayment() async throws {
        let (fleet, tapA, _) = try makeFleet({ try ButtonTapPlugin(window: .seconds(1)) }, mode: .open)
        defer { fleet.shutdown() }
        fleet.store.setAvailable(false)
        #expect(await fleet.a.gate.submit(tapA, "user").kind == "ran")
        #expect(await fleet.a.gate.submit(tapA, "user").kind == "ran")
        let processor = CountingProcessor(latency: .zero)
        let (payments, payA, _) = try makeFleet({ try PaymentPlugin(processor: processor) }, mode: .open)
        defer { payments.shutdown() }
        payments.store.setAvailable(false)
        #expect(await payments.a.gate.submit(payA, .init(key: "acct", idem: "o1", amount: 3)).kind == "unavailable")
        #expect(processor.charges.current == 0)
    }

    @Test func localDecidesAloneWithDividedLimitsAndSaysSo() async throws {
        let (fleet, limitA, _) = try makeFleet(
            { try RateLimitPlugin(count: 10, per: .seconds(1), burst: 5) }, mode: .local, instances: 3)
        defer { fleet.shutdown() }
        fleet.store.setAvailable(false)
        var ran = 0
        for _ in 0..<10 {
            let outcome = await fleet.a.gate.submit(limitA, .init(key: "api"))
            if outcome.kind == "ran" {
                ran += 1
                #expect(outcome.runInfo?.guarantee == .local)
            }
        }
        #expect(ran == 2)  // a limit of 6 back to back, divided over 3 instances
        let processor = CountingProcessor(latency: .zero)
        let (payments, payA, _) = try makeFleet({ try PaymentPlugin(processor: processor) }, mode: .local)
        defer { payments.shutdown() }
        payments.store.setAvailable(false)
        let paid = await payments.a.gate.submit(payA, .init(key: "acct", idem: "l1", amount: 3))
        #expect(paid.kind == "ran" && paid.runInfo?.guarantee == .local)
        #expect(await payments.a.gate.submit(payA, .init(key: "acct", idem: "l1", amount: 3)).runInfo?.guarantee == .local)
        #expect(processor.charges.current == 1)
        payments.store.setAvailable(true)
        let back = await payments.a.gate.submit(payA, .init(key: "acct", idem: "l2", amount: 3))
        #expect(back.kind == "ran" && back.runInfo?.guarantee == .store)
    }

    /// A payment run alone while the store was down is answered by this instance afterwards,
    /// from its own record: the store, which never saw it, must not run it again.
    @Test func aPaymentRunAloneIsReplayedLocallyOnceTheStoreIsBack() async throws {
        let processor = CountingProcessor(latency: .zero)
        let (fleet, payA, _) = try makeFleet({ try PaymentPlugin(processor: processor) }, mode: .local)
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "alone", amount: 9)
        fleet.store.setAvailable(false)
        let first = await fleet.a.gate.submit(payA, payment)
        #expect(first.kind == "ran" && first.runInfo?.guarantee == .local)
        fleet.store.setAvailable(true)
        let retry = await fleet.a.gate.submit(payA, payment)
        #expect(retry.kind == "replayed" && retry.runInfo?.guarantee == .local)
        #expect(retry.output == first.output)
        #expect(processor.charges.current == 1)
    }

    /// A duplicate that heard "running" from the store never runs alone when the store then
    /// fails, whatever the failure mode: it is refused.
    @Test func aDuplicateThatHeardRunningNeverRunsAlone() async throws {
        let processor = CountingProcessor(latency: .seconds(5))
        let (fleet, payA, payB) = try makeFleet({ try PaymentPlugin(processor: processor) }, mode: .local)
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "heard", amount: 4)
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, payment))
        try await pollUntil { fleet.store.calls == 1 }
        let duplicate = await fleet.b.gate.start(fleet.b.gate.request(payB, payment))
        try await pollUntil { fleet.store.calls == 2 }
        fleet.store.setAvailable(false)
        for _ in 0..<4 { await fleet.advance(by: .milliseconds(500)); await fleet.settle() }
        #expect(try await duplicate.settledOutcome().kind == "unavailable")
        fleet.store.setAvailable(true)
        await fleet.advance(by: .seconds(5))
        #expect(try await first.settledOutcome().kind == "ran")
        #expect(processor.charges.current == 1)
    }

    /// A processor that waits until it is cancelled, then commits anyway: a cancellation ends
    /// its wait, not its charge. It reads no clock.
    final class CommittingProcessor: PaymentProcessor {
        let charges = PluginCounter("committed_charges")

        func charge(_ payment: PaymentPlugin.Payment, context: EffectContext) async throws -> PaymentOutcome {
            // A stream nothing feeds or finishes: iterating it ends when the task is cancelled.
            let (stream, continuation) = AsyncStream<Never>.makeStream()
            for await _ in stream {}
            continuation.finish()
            charges.increment()
            return .charged("ch_\(payment.idem)")
        }

        var counters: [PluginCounter] { [charges] }
    }

    /// The gate drains while a payment that commits anyway still runs: its caller hears
    /// `shutdown`, but its record stays its own until it ends and its result is written, so the
    /// other instance replays it instead of charging again.
    @Test func aPaymentStillRunningAtShutdownKeepsItsRecordUntilItEnds() async throws {
        let processor = CommittingProcessor()
        let (fleet, payA, payB) = try makeFleet { try PaymentPlugin(processor: processor) }
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "drain", amount: 3)
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, payment))
        try await pollUntil { fleet.store.calls == 1 }
        await fleet.a.gate.shutdown(gracePeriod: .zero)
        #expect(try await first.settledOutcome().kind == "cancelled(shutdown)")
        // The processor commits as soon as it is cancelled; its result is written, and the other
        // instance replays it (refused while the record is still running, never run again).
        let retry = PaymentPlugin.Payment(key: "acct", idem: "drain", amount: 3, concurrent: .reject)
        var outcome = "conflict"
        try await pollUntil {
            outcome = await fleet.b.gate.submit(payB, retry).kind
            return outcome != "conflict"
        }
        #expect(outcome == "replayed")
        #expect(processor.charges.current == 1)
    }

    /// A payment cancelled at shutdown before it committed gives its record back: a retry on
    /// the other instance runs it, once.
    @Test func aPaymentCancelledAtShutdownGivesItsRecordBack() async throws {
        let processor = CountingProcessor(latency: .seconds(5))
        let (fleet, payA, payB) = try makeFleet { try PaymentPlugin(processor: processor) }
        defer { fleet.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "cancelled", amount: 3)
        let first = await fleet.a.gate.start(fleet.a.gate.request(payA, payment))
        try await pollUntil { fleet.store.calls == 1 }
        await fleet.a.gate.shutdown(gracePeriod: .zero)
        #expect(try await first.settledOutcome().kind == "cancelled(shutdown)")
        // The cancelled charge gives its record back (the store's second call): a retry runs.
        try await pollUntil { fleet.store.calls >= 2 }
        let retry = PaymentPlugin.Payment(key: "acct", idem: "cancelled", amount: 3, concurrent: .reject)
        let ran = await fleet.b.gate.start(fleet.b.gate.request(payB, retry))
        try await pollUntil { fleet.store.calls >= 3 }
        // The charge's 5 s sleep is armed once its task has run on the loop: move the clock in
        // steps until it has charged (one 5 s step taken before the sleep was armed would leave
        // it waiting for ever).
        for _ in 0..<20 where processor.charges.current == 0 {
            await fleet.settle()
            await fleet.advance(by: .seconds(1))
        }
        #expect(try await ran.settledOutcome().kind == "ran")
        #expect(processor.charges.current == 1)
    }

    @Test func aSharedStoreRefusesPoliciesItCannotHold() throws {
        let store = MemoryStore()
        var plugins = PluginRegistry()
        try plugins.register(try ButtonTapPlugin(window: .seconds(1)), store: .shared(store))
        #expect(throws: SluiceError.self) {
            try plugins.register(
                ProbePlugin<Int>("debounced", policy: .debounce(.search, cancelInFlight: false)) { _, _ in 0 },
                store: .shared(store))
        }
        #expect(throws: SluiceError.self) {
            // A result the store could not keep.
            try plugins.register(ProbePlugin<Receipt>("receipts", policy: .idempotent(.payment)) { _, _ in
                Receipt(id: "r", lines: [], metadata: [:], note: nil)
            }, store: .shared(store))
        }
        #expect(plugins.names == ["tap"])
        #expect(throws: SluiceError.self) { try PluginStore.shared(store, instances: 0) }
    }
}
