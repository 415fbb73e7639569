import SluiceCore
import Synchronization

/// A timeline a test moves by hand, for the loops of a group made with it: their `now`, the
/// timers they schedule and the timeouts of their connections (a frame not finished, a peer
/// silent or not reading, a linger) run on it instead of the monotonic clock.
///
/// The loops still run their sockets for real; only time is the test's. A timeout that would
/// take 300 ms takes as long as ``advance(by:)``: the connection sees its deadline pass and
/// closes, and the test reads the close from its socket.
///
/// ```swift
/// let clock = ManualLoopClock()
/// let group = try SluiceLoopGroup(loopCount: 1, clock: clock)
/// // … a connection idles …
/// clock.advance(by: .seconds(300))  // its idle timeout runs out now
/// ```
///
/// Turns (how long one connection's input is handled in a row) stay on the real clock: they
/// share out the loop's processor time, which a test does not stand in for.
public final class ManualLoopClock: Sendable {
    private struct Pending {
        let deadline: Instant
        let sequence: UInt64
        /// The loop that scheduled it.
        let owner: ObjectIdentifier
        /// What it fires for (a timer, a connection): one deadline each, the latest scheduled.
        let key: ObjectIdentifier
        let fire: @Sendable () -> Void
    }

    private struct State {
        var now: Instant
        var sequence: UInt64 = 0
        var pending: [Pending] = []

        /// Removes and returns the pending firings that `isTaken` picks, in scheduling order.
        mutating func take(where isTaken: (Pending) -> Bool) -> [Pending] {
            let taken = pending.filter(isTaken)
            if !taken.isEmpty { pending.removeAll(where: isTaken) }
            return taken
        }
    }

    private let state: Mutex<State>

    /// A clock reading `start` (one second past the timeline's zero by default).
    public init(start: Instant = Instant(nanoseconds: 1_000_000_000)) {
        state = Mutex(State(now: start))
    }

    /// The time on this clock.
    public var now: Instant { state.withSanitizedLock { $0.now } }

    /// The earliest deadline scheduled and not yet reached, if any: a test waits until the
    /// server has armed the deadline it means to pass (a connection times a frame once it has
    /// read its first bytes) before it moves the time.
    public var nextDeadline: Instant? { state.withSanitizedLock { $0.pending.lazy.map(\.deadline).min() } }

    /// Moves the time forward by `duration` and fires, in deadline order, everything scheduled
    /// up to the new time: each firing hands its work to the loop that scheduled it.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a manual loop clock only moves forward")
        let due = state.withSanitizedLock { state -> [Pending] in
            state.now = state.now + duration
            let now = state.now
            return state.take { $0.deadline <= now }.sorted { ($0.deadline, $0.sequence) < ($1.deadline, $1.sequence) }
        }
        for pending in due { pending.fire() }
    }

    /// Calls `fire` once the time reaches `deadline` (at once, if it has), in place of what was
    /// scheduled for `key` before: `fire` hands its work to `owner`, the loop that scheduled it.
    /// `fire` holds what `key` identifies, so the identity is not reused while it is pending.
    func schedule(at deadline: Instant, owner: SluiceLoop, key: ObjectIdentifier, _ fire: @escaping @Sendable () -> Void) {
        let (fireNow, replaced) = state.withSanitizedLock { state -> (Bool, [Pending]) in
            let replaced = state.take { $0.key == key }
            guard deadline > state.now else { return (true, replaced) }
            state.sequence &+= 1
            state.pending.append(Pending(deadline: deadline, sequence: state.sequence, owner: ObjectIdentifier(owner), key: key, fire: fire))
            return (false, replaced)
        }
        // Released here, outside the lock.
        withExtendedLifetime(replaced) {}
        if fireNow { fire() }
    }

    /// Drops what was scheduled for `key` (a timer cancelled, a connection closed).
    func cancel(_ key: ObjectIdentifier) {
        let dropped = state.withSanitizedLock { $0.take { $0.key == key } }
        // Released here, outside the lock.
        withExtendedLifetime(dropped) {}
    }

    /// Drops what `owner` scheduled and has not come due: the loop has stopped, and what the
    /// firings hold (its timers, its connections, the loop itself) is let go.
    func forget(_ owner: SluiceLoop) {
        let loop = ObjectIdentifier(owner)
        let dropped = state.withSanitizedLock { $0.take { $0.owner == loop } }
        // Released here, outside the lock.
        withExtendedLifetime(dropped) {}
    }
}
