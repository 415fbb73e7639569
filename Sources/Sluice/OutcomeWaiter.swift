import SluiceCore
import SluiceLibevent
import Synchronization

/// Where the `async` API waits for a request's outcome: resolved once (by the gate, or by the
/// caller leaving), resumes every continuation waiting on it, and knows where the request waits
/// in the gate so that a caller who leaves can be taken out.
@usableFromInline
final class OutcomeWaiter<Output: Sendable>: Sendable {
    private struct Location {
        let shard: GateShard
        let lane: Int
        let token: EventToken
    }

    private struct State {
        var outcome: GateOutcome<Output>?
        var continuations: [CheckedContinuation<GateOutcome<Output>, Never>] = []
        var location: Location?
        /// Why the caller left before the gate registered the request.
        var leftEarly: CancellationReason?
    }

    private let state = Mutex(State())

    /// A waiter with no outcome yet.
    @usableFromInline
    init() {}

    /// The outcome, if known.
    var outcome: GateOutcome<Output>? { state.withSanitizedLock { $0.outcome } }

    /// Waits with `continuation` (resumed at once if the outcome is known).
    @usableFromInline
    func install(_ continuation: CheckedContinuation<GateOutcome<Output>, Never>) {
        let known = state.withSanitizedLock { state -> GateOutcome<Output>? in
            if let outcome = state.outcome { return outcome }
            state.continuations.append(continuation)
            return nil
        }
        if let known { continuation.resume(returning: known) }
    }

    /// The outcome is known; later calls are ignored.
    @usableFromInline
    func resolve(_ outcome: GateOutcome<Output>) {
        let waiting = state.withSanitizedLock { state -> [CheckedContinuation<GateOutcome<Output>, Never>] in
            guard state.outcome == nil else { return [] }
            state.outcome = outcome
            state.location = nil
            defer { state.continuations.removeAll() }
            return state.continuations
        }
        for continuation in waiting { continuation.resume(returning: outcome) }
    }

    /// The gate registered the request (called on the key's loop). If the caller already left,
    /// the request leaves now.
    @usableFromInline
    func registered(shard: GateShard, lane: Int, token: EventToken) {
        let left = state.withSanitizedLock { state -> CancellationReason? in
            if let reason = state.leftEarly { return reason }
            if state.outcome == nil { state.location = Location(shard: shard, lane: lane, token: token) }
            return nil
        }
        if let left { shard.leave(waiter: token, lane: lane, reason: left) }
    }

    /// The caller stops waiting: it hears `.cancelled(reason)` now, and the request leaves the
    /// gate (on its loop).
    @usableFromInline
    func leave(reason: CancellationReason) {
        let location = state.withSanitizedLock { state -> Location? in
            guard state.outcome == nil else { return nil }
            if state.location == nil { state.leftEarly = reason }
            return state.location
        }
        resolve(.cancelled(reason))
        guard let location else { return }
        let shard = location.shard
        shard.loop.executeIfRunning {
            shard.leave(waiter: location.token, lane: location.lane, reason: reason)
        }
    }
}

/// A request the gate has registered (see ``Gate/start(_:)``): await its ``outcome``, or
/// ``cancel()`` it.
public final class GateTicket<Output: Sendable>: Sendable {
    private let waiter: OutcomeWaiter<Output>

    init(waiter: OutcomeWaiter<Output>) {
        self.waiter = waiter
    }

    /// The request's outcome. If the awaiting task is cancelled, the request leaves with
    /// ``CancellationReason/callerCancelled``.
    public var outcome: GateOutcome<Output> {
        get async {
            let waiter = self.waiter
            return await withTaskCancellationHandler {
                await withCheckedContinuation { waiter.install($0) }
            } onCancel: {
                waiter.leave(reason: .callerCancelled)
            }
        }
    }

    /// The outcome if it is known already, without waiting.
    public var resolvedOutcome: GateOutcome<Output>? { waiter.outcome }

    /// The request leaves: it is answered ``CancellationReason/requested`` (and a single
    /// execution it made is cancelled).
    public func cancel() {
        waiter.leave(reason: .requested)
    }
}
