import SluiceCore
import SluiceLibevent
import Synchronization

/// What a plugin's effect sees while it runs: its key, its loop and clock, and a cancellable
/// sleep on that clock.
public struct EffectContext: Sendable {
    /// The request's key.
    public let key: String
    /// The id of the connection the request arrived on.
    public let connectionID: UInt64
    /// The loop the effect runs on (the key's loop).
    public let loop: EventLoop
    /// The shard's clock.
    public let clock: any GateClock

    /// Creates a context (the runtime and test harnesses do).
    public init(key: String, connectionID: UInt64, loop: EventLoop, clock: any GateClock) {
        self.key = key
        self.connectionID = connectionID
        self.loop = loop
        self.clock = clock
    }

    /// The current instant on the shard's clock. Call from the effect (it runs on the loop).
    public var now: Instant { clock.now }

    /// Suspends for `duration` on the shard's clock.
    ///
    /// - Throws: `CancellationError` as soon as the effect's task is cancelled (at once if it
    ///   already was).
    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        let clock = self.clock
        let loop = self.loop
        let waiter = SleepWaiter()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                waiter.install(continuation)
                // Arm on the loop: the clock is loop-confined.
                let arm: @Sendable () -> Void = {
                    let timer = clock.schedule(at: clock.now + duration) { waiter.resume(with: .success(())) }
                    waiter.setTimer(timer)
                }
                if loop.inEventLoop { arm() } else { loop.execute(arm) }
            }
        } onCancel: {
            waiter.resume(with: .failure(CancellationError()))
        }
    }
}

/// Resumes a sleeping effect exactly once: when its timer fires or when it is cancelled,
/// whichever comes first.
private final class SleepWaiter: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var pendingOutcome: Result<Void, any Error>?
        var timer: (any GateTimer)?
        var done = false
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<Void, any Error>) {
        let early = state.withLock { state -> Result<Void, any Error>? in
            if let outcome = state.pendingOutcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func setTimer(_ timer: any GateTimer) {
        let cancelNow = state.withLock { state -> Bool in
            if state.done { return true }
            state.timer = timer
            return false
        }
        if cancelNow { timer.cancel() }
    }

    func resume(with outcome: Result<Void, any Error>) {
        let (continuation, timer) = state.withLock { state -> (CheckedContinuation<Void, any Error>?, (any GateTimer)?) in
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
