import CoreMetrics
import SluiceCore
import SluiceLibevent

/// What a request holds of the stages a shared store admitted it through: the rate its cost
/// spent and the concurrency slots its owner holds, given back when it never runs, its slots
/// freed when its effect ends, and renewed while it runs (every third of the slots' lease), so
/// that the slots of an instance that stopped come free by themselves.
///
/// Used on the loop of the shard that made it.
@usableFromInline
final class StoreLimitHold: @unchecked Sendable {
    // @unchecked Sendable: it is made, renewed, given back and released on one loop (its
    // renewal timer and every store completion run there), so its fields are only touched there.
    let stages: [StoreStage]
    let admission: StoreAdmission
    let owner: String
    let cost: Int
    private let store: any SharedStore
    private let loop: EventLoop
    private let clock: any GateClock
    private let slotsLost: Counter
    private var renewal: (any GateTimer)?
    /// Whether the request gave back or released what it held (nothing more is sent).
    private(set) var isOver = false

    init(
        stages: [StoreStage], admission: StoreAdmission, owner: String, cost: Int, store: any SharedStore,
        loop: EventLoop, clock: any GateClock, slotsLost: Counter
    ) {
        self.stages = stages
        self.admission = admission
        self.owner = owner
        self.cost = cost
        self.store = store
        self.loop = loop
        self.clock = clock
        self.slotsLost = slotsLost
    }

    /// The concurrency slots it holds, and their shortest lease.
    private var slots: (count: Int, lease: Duration?) {
        var count = 0
        var lease: Duration?
        for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
            guard case .concurrency(_, let length) = stage.limit else { continue }
            count += 1
            lease = min(lease ?? length, length)
        }
        return (count, lease)
    }

    /// Renews its slots every third of their lease from now on, until it is over.
    func startRenewing() {
        guard !isOver, renewal == nil, let lease = slots.lease else { return }
        scheduleRenewal(after: lease / 3)
    }

    private func scheduleRenewal(after interval: Duration) {
        renewal = clock.schedule(at: clock.now + interval) { [self] in
            guard !isOver else { return }
            let held = admission.hold
            let expected = slots.count
            store.renewChainSlots(
                stages.enumerated().filter { held.contains($0.offset) }.map(\.element), owner: owner, on: loop
            ) { [self] answer in
                guard !isOver else { return }
                if case .success(let count) = answer, count < expected { slotsLost.increment(by: expected - count) }
                if let lease = slots.lease { scheduleRenewal(after: lease / 3) }
            }
        }
    }

    /// The request will not run: everything it took goes back.
    @usableFromInline func giveBack() {
        guard !isOver else { return }
        isOver = true
        renewal?.cancel()
        store.giveBackChain(stages, admission: admission, cost: cost, owner: owner, on: loop)
    }

    /// Its effect ended: its slots are free (the rate it spent stays spent).
    @usableFromInline func release() {
        guard !isOver else { return }
        isOver = true
        renewal?.cancel()
        guard slots.count > 0 else { return }
        var slotsOnly = admission
        slotsOnly.hold = ChainHold()
        for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
            if case .concurrency = stage.limit { slotsOnly.hold.insert(index) }
        }
        store.giveBackChain(stages, admission: slotsOnly, cost: 0, owner: owner, on: loop)
    }
}
