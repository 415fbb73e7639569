import Sluice
import SluicePayment
import Synchronization
import Testing

/// A caller whose work waits in a queue until the test runs it, on the test's thread: a store
/// driven with no loop and no socket.
final class QueuedStoreCaller: StoreCaller {
    private let queue = Mutex<[@Sendable () -> Void]>([])

    func execute(_ work: @escaping @Sendable () -> Void) {
        queue.withSanitizedLock { $0.append(work) }
    }

    /// Runs what is queued (and what that queues) until nothing is left; returns how many ran.
    @discardableResult
    func drain() -> Int {
        var ran = 0
        while let work = queue.withSanitizedLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            work()
            ran += 1
        }
        return ran
    }
}

/// Answers a store call into, read back after the caller's queue is drained.
final class StoreAnswer<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)
    var completion: @Sendable (Result<Value, StoreError>) -> Void {
        { result in self.value.withSanitizedLock { $0 = try? result.get() } }
    }
    var answered: Value? { value.withSanitizedLock { $0 } }
}

/// The shared-store protocol on one thread, with a clock the test sets: the store's signature
/// names no loop, so a caller of the test's own stands in for the gate's shard.
@Suite struct StoreWithoutALoopTests {
    @Test func aRecordsLeaseProtocolRunsOnOneThread() throws {
        let time = Mutex<Int64>(0)
        let store = MemoryStore(epoch: 1) { Instant(nanoseconds: time.withSanitizedLock { $0 }) }
        let caller = QueuedStoreCaller()
        let record = StoreKey(plugin: "pay", key: "order-1")

        let first = StoreAnswer<StoreClaim>()
        store.claim(record, fingerprint: "f", owner: "a", lease: .seconds(5), retention: .seconds(60), on: caller, first.completion)
        // Never from inside the call: the answer waits for the caller's thread.
        #expect(first.answered == nil)
        #expect(caller.drain() == 1)
        guard case .claimed(let lease) = first.answered else {
            Issue.record("the first claim got \(String(describing: first.answered))")
            return
        }

        let second = StoreAnswer<StoreClaim>()
        store.claim(record, fingerprint: "f", owner: "b", lease: .seconds(5), retention: .seconds(60), on: caller, second.completion)
        caller.drain()
        #expect(second.answered == .running)

        // The lease runs out and another owner takes the record over with a greater fence: the
        // first owner can no longer complete it.
        time.withSanitizedLock { $0 = 6_000_000_000 }
        let takeover = StoreAnswer<StoreClaim>()
        store.claim(record, fingerprint: "f", owner: "b", lease: .seconds(5), retention: .seconds(60), on: caller, takeover.completion)
        caller.drain()
        guard case .claimed(let newer) = takeover.answered else {
            Issue.record("the takeover got \(String(describing: takeover.answered))")
            return
        }
        #expect(newer.fence > lease.fence)
        let stale = StoreAnswer<Bool>()
        store.complete(record, lease: lease, fingerprint: "f", result: [1], retention: .seconds(60), on: caller, stale.completion)
        let current = StoreAnswer<Bool>()
        store.complete(record, lease: newer, fingerprint: "f", result: [2], retention: .seconds(60), on: caller, current.completion)
        #expect(caller.drain() == 2)
        #expect(stale.answered == false)
        #expect(current.answered == true)

        let replay = StoreAnswer<StoreClaim>()
        store.claim(record, fingerprint: "f", owner: "c", lease: .seconds(5), retention: .seconds(60), on: caller, replay.completion)
        caller.drain()
        #expect(replay.answered == .completed([2]))
        #expect(store.isReachable(from: caller))
    }

    /// The payment ledger names no loop either: a charge carries its record's fence, and the
    /// owner a takeover replaced is refused as stale, whoever the caller is.
    @Test func aLedgerTakesAChargeFromACallerThatIsNoLoop() async throws {
        let ledger = MemoryChargeLedger(now: { Instant(nanoseconds: 1) })
        let caller = QueuedStoreCaller()
        let older = FencingToken(epoch: 1, counter: 1)
        let newer = FencingToken(epoch: 1, counter: 2)
        let call = { (fence: FencingToken, id: String) in LedgerCall(record: "pay:order-1", fence: fence, amount: 5, chargeID: id) }
        #expect(try await ledger.charge(call(newer, "ch_1"), on: caller) == .charged("ch_1"))
        #expect(try await ledger.charge(call(older, "ch_2"), on: caller) == .stale(newest: newer))
        #expect(try await ledger.charge(call(newer, "ch_3"), on: caller) == .alreadyCharged("ch_1"))
        #expect(ledger.charge(of: "pay:order-1") == "ch_1")
    }
}
