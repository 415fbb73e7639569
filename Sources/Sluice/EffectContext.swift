import SluiceCore
import SluiceLibevent
import Synchronization

/// What a plugin's effect sees while it runs: its key and effect ID, its loop and clock, a
/// cancellable sleep on that clock, and the key's tally.
///
/// The effect runs as a task on the key's loop; call these from the effect itself.
public struct EffectContext: Sendable {
    /// The request's key.
    public let key: String
    /// The effect ID it runs under.
    public let effectID: EffectID
    @usableFromInline let shard: GateShard
    @usableFromInline let lane: Int
    /// The execution the effect runs as; `nil` for an effect run in place (it never suspends,
    /// so nothing can change under it between its decision and its end).
    @usableFromInline let execution: EventToken?

    @inlinable
    init(key: String, effectID: EffectID, shard: GateShard, lane: Int, execution: EventToken?) {
        self.key = key
        self.effectID = effectID
        self.shard = shard
        self.lane = lane
        self.execution = execution
    }

    /// The commit guard: call it right before the effect's irreversible step (the charge, the
    /// write elsewhere), and make that step only if it returns.
    ///
    /// It throws when the effect must not commit: it was cancelled (a drain that ran out of
    /// time cancels the effects that have not passed their commit point), or it holds a shared
    /// store's lease that cannot be renewed now (the store's connection is lost, or the lease's
    /// last renewal got no answer) or has less than a third of it left by this process's
    /// monotonic clock (the process was paused): another instance may take the record over
    /// before the step lands; or the store said another owner took it. Once it has returned,
    /// the effect is past its commit point: a drain that runs out of time lets it finish, its
    /// result is written to the store and its callers are answered with it.
    ///
    /// A lease alone never makes an external change exactly-once (a paused process can pass
    /// this check and then stall before its call lands): pass the record's identity and fence
    /// it returns downstream, to an end that keeps its changes by record and refuses an older
    /// fence. When that end refuses the call as stale, throw ``CommitRefusal`` with code
    /// ``CommitRefusal/Code/staleFence``: the gate then answers the effect's callers with the
    /// record's result once its current owner stores it, as it answers a duplicate.
    ///
    /// - Returns: the effect's idempotency record and the fence of its claim (``record``), or
    ///   `nil` for an effect that has no record (its plugin is not idempotent).
    /// - Throws: ``CommitRefusal``.
    @discardableResult
    public func commit() throws(CommitRefusal) -> EffectRecord? {
        guard let execution else { return nil }
        return try shard.commit(lane: lane, execution: execution).get()
    }

    /// The idempotency record the effect runs for and the fencing token of its current claim
    /// (see ``EffectRecord``); `nil` when its plugin is not idempotent. The fence can change
    /// while the effect runs (its lease ran out and this process claimed the record again):
    /// take the one ``commit()`` returns for the irreversible step.
    public var record: EffectRecord? {
        guard let execution else { return nil }
        return shard.record(lane: lane, execution: execution)
    }

    /// The loop the effect runs on (the key's loop).
    public var loop: SluiceLoop { shard.loop }

    /// The shard's clock.
    public var clock: any GateClock { shard.clock }

    /// The current instant on the shard's clock: on the loop, the time read once for the loop's
    /// iteration. An effect that judges a deadline before an irreversible step leaves that to
    /// ``commit()``, which reads the clock afresh (or reads `clock.freshNow` itself).
    public var now: Instant { clock.now }

    /// Adds `amount` to this key's tally for this plugin and returns the new count (how many taps
    /// of a key ran, a usage meter, …).
    ///
    /// Tallies live in the key's shard, in a table bounded by the plugin's `tallyBudget`: when it
    /// is full the tally of a key not used lately is evicted and that key counts from zero
    /// again. Returns 0 only if a single key does not fit the budget.
    @discardableResult
    public func incrementTally(by amount: Int = 1) -> Int {
        shard.incrementTally(lane: lane, key: key, by: amount)
    }

    /// Suspends for `duration` on the shard's clock; a duration of zero or less returns at once.
    ///
    /// - Throws: `CancellationError` as soon as the effect's task is cancelled (at once if it
    ///   already was).
    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        // Nothing to wait for (on a manual clock, a timer at `now` would wait for an advance).
        if duration <= .zero { return }
        // A loop on its way to stopping fires no timer (and work arriving then may run on
        // another thread): the sleep ends at once.
        if !loop.isAcceptingWork { throw CancellationError() }
        let clock = self.clock
        let loop = self.loop
        let waiter = SleepWaiter()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                waiter.install(continuation)
                // Arm on the loop: the clock is loop-confined.
                let arm: @Sendable () -> Void = {
                    // Cancelled before this ran: nothing to arm (and nothing would unregister it).
                    if waiter.isDone { return }
                    // Registered with the loop until it wakes: a loop that stops first (its
                    // timers never fire) wakes it with a cancellation instead of leaving the
                    // effect suspended for ever.
                    loop.registerForShutdown(waiter)
                    let timer = clock.schedule(at: clock.now + duration) {
                        loop.unregisterForShutdown(waiter)
                        waiter.resume(with: .success(()))
                    }
                    waiter.setTimer(timer)
                }
                if loop.inEventLoop {
                    arm()
                } else if !loop.executeIfRunning(arm) {
                    waiter.resume(with: .failure(CancellationError()))
                }
            }
        } onCancel: {
            waiter.resume(with: .failure(CancellationError()))
            _ = loop.executeIfRunning { loop.unregisterForShutdown(waiter) }
        }
    }
}

/// Resumes a sleeping effect exactly once: when its timer fires or when it is cancelled,
/// whichever comes first.
private final class SleepWaiter: LoopResource, Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var pendingOutcome: Result<Void, any Error>?
        var timer: (any GateTimer)?
        var done = false
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<Void, any Error>) {
        let early = state.withSanitizedLock { state -> Result<Void, any Error>? in
            if let outcome = state.pendingOutcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func setTimer(_ timer: any GateTimer) {
        let cancelNow = state.withSanitizedLock { state -> Bool in
            if state.done { return true }
            state.timer = timer
            return false
        }
        if cancelNow { timer.cancel() }
    }

    /// Whether it was resumed (or cancelled) already.
    var isDone: Bool { state.withSanitizedLock { $0.done } }

    /// The loop stopped before the timer fired.
    func closeForShutdown() {
        resume(with: .failure(CancellationError()))
    }

    func resume(with outcome: Result<Void, any Error>) {
        let (continuation, timer) = state.withSanitizedLock { state -> (CheckedContinuation<Void, any Error>?, (any GateTimer)?) in
            if state.done { return (nil, nil) }
            state.done = true
            defer {
                state.continuation = nil
                state.timer = nil
            }
            if state.continuation == nil { state.pendingOutcome = outcome }
            return (state.continuation, state.timer)
        }
        if case .failure = outcome { timer?.cancel() }
        continuation?.resume(with: outcome)
    }
}
