import CoreMetrics
import SluiceCore
import SluiceLibevent
import Synchronization

/// What a request holds of the stages a shared store admitted it through: the rate its cost
/// spent and the concurrency slots its owner holds, given back when it never runs, its slots
/// freed when its effect ends, and renewed while it runs (every third of the slots' lease), so
/// that the slots of an instance that stopped come free by themselves.
///
/// Given back or released from any thread (a cancellation may come from one); its store calls
/// are made on its shard's loop, as a store expects.
@usableFromInline
final class StoreLimitHold: Sendable {
    let stages: [StoreStage]
    let admission: StoreAdmission
    let owner: String
    let cost: Int
    private let store: any SharedStore
    private let loop: SluiceLoop
    private let clock: any GateClock
    private let slotsLost: Counter
    /// The concurrency stages it holds (shadow ones included), where they are among `stages`,
    /// and their shortest lease.
    private let slots: [StoreStage]
    private let slotHold: ChainHold
    private let slotLease: Duration?

    private struct State {
        var renewal: (any GateTimer)?
        /// Whether it gave back or released what it held (nothing more is sent).
        var isOver = false
        /// Slots the last renewal found held (each one lost is counted once).
        var held: Int
    }

    private let state: Mutex<State>

    init(
        stages: [StoreStage], admission: StoreAdmission, owner: String, cost: Int, store: any SharedStore,
        loop: SluiceLoop, clock: any GateClock, slotsLost: Counter
    ) {
        self.stages = stages
        self.admission = admission
        self.owner = owner
        self.cost = cost
        self.store = store
        self.loop = loop
        self.clock = clock
        self.slotsLost = slotsLost
        var slots: [StoreStage] = []
        var slotHold = ChainHold()
        var lease: Duration?
        for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
            guard case .concurrency(_, let length) = stage.limit else { continue }
            slots.append(stage)
            slotHold.insert(index)
            lease = min(lease ?? length, length)
        }
        self.slots = slots
        self.slotHold = slotHold
        self.slotLease = lease
        self.state = Mutex(State(held: slots.count))
    }

    /// Whether it gave back or released what it held.
    var isOver: Bool { state.withSanitizedLock { $0.isOver } }

    /// Renews its slots every third of their lease from now on, until it is over. Call it on
    /// the loop.
    func startRenewing() {
        guard let lease = slotLease else { return }
        scheduleRenewal(after: lease / 3)
    }

    private func scheduleRenewal(after interval: Duration) {
        let timer = clock.schedule(at: clock.now + interval) { [self] in renew() }
        let cancelled = state.withSanitizedLock { state -> Bool in
            guard !state.isOver else { return true }
            state.renewal = timer
            return false
        }
        if cancelled { timer.cancel() }
    }

    private func renew() {
        guard !isOver, let lease = slotLease else { return }
        store.renewChainSlots(slots, owner: owner, on: loop) { [self] answer in
            let lost = state.withSanitizedLock { state -> Int? in
                guard !state.isOver else { return nil }
                guard case .success(let count) = answer, count < state.held else { return 0 }
                defer { state.held = count }
                return state.held - count
            }
            guard let lost else { return }
            if lost > 0 { slotsLost.increment(by: lost) }
            scheduleRenewal(after: lease / 3)
        }
    }

    /// Marks it over; `false` if it already was.
    private func end() -> Bool {
        let timer = state.withSanitizedLock { state -> (any GateTimer)?? in
            guard !state.isOver else { return .none }
            state.isOver = true
            defer { state.renewal = nil }
            return .some(state.renewal)
        }
        guard let timer else { return false }
        timer?.cancel()
        return true
    }

    /// Runs `body` on the loop: at once when called there.
    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { body() } else { loop.execute(body) }
    }

    /// The request will not run: everything it took goes back.
    @usableFromInline func giveBack() {
        guard end() else { return }
        onLoop { [self] in store.giveBackChain(stages, admission: admission, cost: cost, owner: owner, on: loop) }
    }

    /// Its effect ended: its slots are free (the rate it spent stays spent).
    @usableFromInline func release() {
        guard end(), !slots.isEmpty else { return }
        var freed = admission
        freed.hold = slotHold
        onLoop { [self, freed] in store.giveBackChain(stages, admission: freed, cost: 0, owner: owner, on: loop) }
    }
}
