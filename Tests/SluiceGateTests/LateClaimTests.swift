import Sluice
import SluicePayment
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// A claim that reaches the store late: sent before this process held the record, it lands after
/// the lease of this process's own execution ran out. The store then grants it. The record holds
/// a result this process could not write yet, and that result must not be lost.
@Suite struct LateClaimTests {
    /// A memory store whose next claim is held back (as a network may delay a command) until the
    /// test lets it through: the store runs it then, with its clock's time then.
    final class LateClaimStore: SharedStore {
        struct Held {
            let record: StoreKey
            let fingerprint: String
            let owner: String
            let lease: Duration
            let retention: Duration
            let caller: any StoreCaller
            let completion: @Sendable (Result<StoreClaim, StoreError>) -> Void
        }

        let inner: MemoryStore
        private let state = Mutex<(holdNext: Bool, held: [Held])>((false, []))

        init(_ inner: MemoryStore) {
            self.inner = inner
        }

        /// Holds back the next claim.
        func holdNextClaim() {
            state.withSanitizedLock { $0.holdNext = true }
        }

        /// Claims held back so far.
        var heldCount: Int { state.withSanitizedLock { $0.held.count } }

        /// Lets the claims held back reach the store now.
        func letHeldClaimsThrough() {
            let held = state.withSanitizedLock { state in
                defer { state.held = [] }
                return state.held
            }
            for claim in held {
                inner.claim(
                    claim.record, fingerprint: claim.fingerprint, owner: claim.owner, lease: claim.lease,
                    retention: claim.retention, on: claim.caller, claim.completion)
            }
        }

        func claim(
            _ record: StoreKey, fingerprint: String, owner: String, lease: Duration, retention: Duration, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<StoreClaim, StoreError>) -> Void
        ) {
            let held = Held(
                record: record, fingerprint: fingerprint, owner: owner, lease: lease, retention: retention, caller: caller,
                completion: completion)
            let holding = state.withSanitizedLock { state in
                guard state.holdNext else { return false }
                state.holdNext = false
                state.held.append(held)
                return true
            }
            guard !holding else { return }
            inner.claim(
                record, fingerprint: fingerprint, owner: owner, lease: lease, retention: retention, on: caller, completion)
        }

        func throttle(
            _ key: StoreKey, interval: Duration, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Duration?, StoreError>) -> Void
        ) {
            inner.throttle(key, interval: interval, on: caller, completion)
        }

        func admit(
            _ stages: [StoreStage], cost: Int, owner: String, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void
        ) {
            inner.admit(stages, cost: cost, owner: owner, on: caller, completion)
        }

        func giveBack(
            _ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
        ) {
            inner.giveBack(stages, admission: admission, cost: cost, owner: owner, on: caller, completion)
        }

        func renewSlots(
            _ stages: [StoreStage], owner: String, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
        ) {
            inner.renewSlots(stages, owner: owner, on: caller, completion)
        }

        func rateLimit(
            _ key: StoreKey, options: RateLimitOptions, cost: Int, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<RateLimitDecision, StoreError>) -> Void
        ) {
            inner.rateLimit(key, options: options, cost: cost, on: caller, completion)
        }

        func renew(
            _ record: StoreKey, lease: StoreLease, fingerprint: String, duration: Duration, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
        ) {
            inner.renew(record, lease: lease, fingerprint: fingerprint, duration: duration, on: caller, completion)
        }

        func complete(
            _ record: StoreKey, lease: StoreLease, fingerprint: String, result: [UInt8], retention: Duration,
            on caller: any StoreCaller, _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
        ) {
            inner.complete(record, lease: lease, fingerprint: fingerprint, result: result, retention: retention, on: caller, completion)
        }

        func release(
            _ record: StoreKey, lease: StoreLease, on caller: any StoreCaller,
            _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
        ) {
            inner.release(record, lease: lease, on: caller, completion)
        }

        func isReachable(from caller: any StoreCaller) -> Bool { inner.isReachable(from: caller) }
    }

    /// A payment ran and its result could not be written (the store went away), and its lease
    /// ran out at the store. Then a claim that this process sent before it held the record lands
    /// and is granted. The result is written under that new lease: the late request and every
    /// retry replay it, and the card is charged once.
    @Test func aLateClaimOfARecordWhoseResultAwaitsItsWriteKeepsTheResult() async throws {
        let clock = ManualGateClock()
        let memory = MemoryStore(now: { clock.now })
        let store = LateClaimStore(memory)
        let processor = CountingProcessor(latency: .seconds(1))
        var plugins = PluginRegistry()
        let pay = try plugins.register(
            try PaymentPlugin(lease: .seconds(6), processor: processor), store: try PluginStore.shared(store, whenUnavailable: .closed))
        let harness = try GateHarness(plugins: plugins, clock: clock)
        defer { harness.shutdown() }
        let payment = PaymentPlugin.Payment(key: "acct", idem: "late", amount: 5)

        // The late request: its claim is held back on the way.
        store.holdNextClaim()
        let late = await harness.gate.start(harness.gate.request(pay, payment))
        try await pollUntil { store.heldCount == 1 }
        // The same payment again: its claim lands, and it runs for a second.
        let first = await harness.gate.start(harness.gate.request(pay, payment))
        try await pollUntil { memory.calls == 1 }
        await harness.settle()
        // The store goes away before the charge ends: its result cannot be written, and its
        // renewals fail, until its lease has run out at the store (6 s).
        memory.setAvailable(false)
        await harness.advance(by: .seconds(1))
        #expect(try await first.settledOutcome().kind == "ran")
        for _ in 0..<8 { await harness.advance(by: .seconds(1)) }
        #expect(processor.charges.current == 1)

        // The store is back, and the late claim lands before anything else: the record is free
        // at the store, so it is granted.
        memory.setAvailable(true)
        store.letHeldClaimsThrough()
        #expect(try await late.settledOutcome().kind == "replayed")
        for _ in 0..<4 { await harness.advance(by: .seconds(1)) }

        // Once written, a retry replays the result from the store: no second charge.
        // (Started, with the clock moved on, so that a charge that ran again would end too.)
        let retry = await harness.gate.start(harness.gate.request(pay, payment))
        for _ in 0..<2 { await harness.advance(by: .seconds(1)) }
        #expect(try await retry.settledOutcome().kind == "replayed")
        #expect(processor.charges.current == 1)
    }
}
