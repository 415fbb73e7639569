import SluiceCore
import SluiceLibevent

/// The shard's lock, and the actions it carries out once released.
extension GateShard {
    /// Runs `body` with the lock held; leaving the outermost critical section carries out the
    /// actions queued in it, with the lock released.
    @inlinable
    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock.lock()
        depth &+= 1
        defer { leave() }
        return try body()
    }

    /// Leaves a critical section entered by `lock.lock()` and `depth += 1`.
    @inlinable
    func leave() {
        depth &-= 1
        if depth == 0, hasActions {
            performActions()
        } else {
            lock.unlock()
        }
    }

    /// Carries out the queued actions with the lock released, until none is left; returns with
    /// the lock released. Called holding the lock, at depth 0.
    @usableFromInline
    func performActions() {
        performActions(favouring: Optional<PluginLane<NoPlugin>>.none)
    }

    /// ``performActions()``, calling `typed`'s tasks and completions directly (specialized
    /// for its plugin where the caller is) and the other lanes' through their protocol.
    @inlinable
    func performActions<Plugin: GatePlugin>(favouring typed: PluginLane<Plugin>?) {
        while true {
            // Taken whole, and their buffers given back once carried out, so that queueing
            // allocates nothing once the buffers have grown.
            var cancelling: [Task<Void, Never>] = []
            var starting: [(lane: Int, token: EventToken)] = []
            var flushing: [Int] = []
            swap(&cancelling, &cancellations)
            swap(&starting, &launches)
            swap(&flushing, &lanesToFlush)
            // The completions are taken now, with the lock held: one delivered after the lock
            // is released goes to a new batch, which the thread that delivered it carries out
            // (never this one, in the middle of another request).
            var typedBatch: LaneOutboxBatch<Plugin.Output>?
            var batches: [any OutboxBatch] = []
            for lane in flushing {
                if let typed, typed.index == lane {
                    typedBatch = typed.takeTypedOutbox()
                } else {
                    batches.append(lanes[lane].takeOutbox())
                }
            }
            lock.unlock()
            for task in cancelling { task.cancel() }
            for launch in starting {
                if let typed, typed.index == launch.lane {
                    typed.startTask(launch.token, shard: self)
                } else {
                    lanes[launch.lane].startTask(launch.token, shard: self)
                }
            }
            typedBatch?.deliver()
            for batch in batches { batch.deliver() }
            cancelling.removeAll(keepingCapacity: true)
            starting.removeAll(keepingCapacity: true)
            flushing.removeAll(keepingCapacity: true)
            lock.lock()
            if cancellations.capacity == 0 { swap(&cancelling, &cancellations) }
            if launches.capacity == 0 { swap(&starting, &launches) }
            if lanesToFlush.capacity == 0 { swap(&flushing, &lanesToFlush) }
            if !hasActions {
                lock.unlock()
                return
            }
        }
    }

    /// Leaves a critical section of `submit` for `lane`'s plugin (see ``leave()``).
    @inlinable
    func leave<Plugin: GatePlugin>(favouring lane: PluginLane<Plugin>) {
        depth &-= 1
        if depth == 0, hasActions {
            performActions(favouring: lane)
        } else {
            lock.unlock()
        }
    }

    /// Whether actions are queued (call with the lock held).
    @inlinable
    var hasActions: Bool {
        !(launches.isEmpty && cancellations.isEmpty && lanesToFlush.isEmpty)
    }

    /// Cancels `task` once the lock is released (its cancellation handlers run code of its
    /// own). Call with the lock held.
    @inlinable
    func cancelLater(_ task: Task<Void, Never>?) {
        guard let task else { return }
        cancellations.append(task)
    }

    /// The current instant for a decision: the clock's, never before one read earlier (a loop's
    /// cached time may trail a fresh read on another thread). Call with the lock held.
    @inlinable
    var now: Instant { notBeforeLatest(clock.now) }

    /// ``now`` from a fresh read of the clock (``GateClock/freshNow``), for a check that guards
    /// an effect on the world outside. Call with the lock held.
    @usableFromInline
    var freshNow: Instant { notBeforeLatest(clock.freshNow) }

    /// `read`, or the latest instant read before it when that is later; keeps the later one.
    @inlinable
    func notBeforeLatest(_ read: Instant) -> Instant {
        if read > latest { latest = read }
        return latest
    }
}
