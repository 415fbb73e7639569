import Sluice
import SluiceLibevent
import Synchronization

/// A `GateClock` that stands still until a test advances it: plugin and gate tests decide
/// exact window boundaries without waiting for real time.
///
/// Timers run on the loop that armed them, in deadline order, when ``advance(by:)`` passes
/// their deadline; `now` reads as each timer's deadline while it runs.
///
/// Give it to a gate through ``clock(for:)`` (`Gate(…, clock: manual.clock(for:))`), so that it
/// knows the gate's loops: after each timer it fires, ``advance(by:)`` lets every one of them
/// run what the timer queued before it looks for the next. A timer armed by a caller off the
/// loops fires on the advancing task, and what it starts (an effect's task, the timer of the
/// effect's first sleep) runs on the key's loop: without that wait, the sleep could be armed
/// after the advance has moved the clock past it, and never fire.
public final class ManualGateClock: GateClock, Sendable {
    private struct State {
        var now: Instant
        var sequence: UInt64 = 0
        var timers: [ManualTimer] = []
        /// The loops of the gates this clock was given to and those timers were armed on
        /// (weakly: a loop's shard holds the clock).
        var loops: [WeakLoop] = []

        mutating func remember(_ loop: SluiceLoop) {
            if loops.contains(where: { $0.loop === loop }) { return }
            loops.removeAll { $0.loop == nil }
            loops.append(WeakLoop(loop: loop))
        }
    }

    private struct WeakLoop {
        weak var loop: SluiceLoop?
    }

    private let state: Mutex<State>

    /// A clock reading `start`.
    public init(start: Instant = Instant(milliseconds: 1_000_000)) {
        state = Mutex(State(now: start))
    }

    public var now: Instant { state.withSanitizedLock { $0.now } }

    /// This clock, for the shard on `loop`: what a gate's `clock` parameter takes. The clock
    /// remembers `loop`, and ``advance(by:)`` lets it run what each fired timer queued.
    public func clock(for loop: SluiceLoop) -> any GateClock {
        state.withSanitizedLock { $0.remember(loop) }
        return self
    }

    public func schedule(at deadline: Instant, _ body: @escaping @Sendable () -> Void) -> any GateTimer {
        state.withSanitizedLock { state in
            state.sequence += 1
            let loop = SluiceLoop.current
            if let loop { state.remember(loop) }
            let timer = ManualTimer(deadline: deadline, sequence: state.sequence, loop: loop, body: body)
            state.timers.append(timer)
            return timer
        }
    }

    /// The number of timers armed and not yet fired or cancelled.
    public var pendingTimers: Int {
        state.withSanitizedLock { $0.timers.filter { !$0.isCancelled }.count }
    }

    /// Moves the clock forward by `duration`, running every timer that comes due on its loop (in
    /// deadline order, including timers those timers arm); after each, it lets the loops (those
    /// of ``clock(for:)`` and those timers were armed on) run what the timer queued, so that a
    /// timer armed meanwhile reads the fired timer's deadline as `now`.
    public func advance(by duration: Duration) async {
        let target = now + duration
        while true {
            while let timer = nextDue(before: target) {
                if let loop = timer.loop {
                    await loop.submit { timer.fire() }
                } else {
                    timer.fire()
                }
                await settle()
            }
            // The clock moves only if no timer is due by then, checked under the same lock: a
            // timer armed between a check and the move would be neither fired nor seen.
            let moved = state.withSanitizedLock { state -> Bool in
                if state.timers.contains(where: { !$0.isCancelled && $0.deadline <= target }) { return false }
                state.now = max(state.now, target)
                return true
            }
            if moved { break }
        }
    }

    /// Drops every timer without running it: for a harness whose loops have stopped, so that
    /// what the timers' bodies hold (a shard, its tables) is released with the harness.
    public func cancelAll() {
        let timers = state.withSanitizedLock { state -> [ManualTimer] in
            defer { state.timers.removeAll() }
            return state.timers
        }
        for timer in timers { timer.cancel() }
    }

    /// Moves the clock forward without running the timers that come due: what a socket
    /// callback sees when libevent runs it before the due timers of the same loop iteration.
    public func advanceWithoutFiring(by duration: Duration) {
        state.withSanitizedLock { $0.now = $0.now + duration }
    }

    private func nextDue(before target: Instant) -> ManualTimer? {
        state.withSanitizedLock { state in
            state.timers.removeAll { $0.isCancelled }
            guard let index = state.timers.indices.min(by: { state.timers[$0] < state.timers[$1] }),
                state.timers[index].deadline <= target
            else { return nil }
            let timer = state.timers.remove(at: index)
            state.now = max(state.now, timer.deadline)
            return timer
        }
    }

    /// Lets the loops the clock knows run the jobs queued so far, and what those queue (on any
    /// of them), a few rounds deep.
    private func settle() async {
        let loops = state.withSanitizedLock { $0.loops.compactMap(\.loop) }
        for _ in 0..<8 {
            for loop in loops { await loop.submit {} }
        }
    }
}

/// A timer of a ``ManualGateClock``.
private final class ManualTimer: GateTimer, Comparable {
    // Sendable: every stored property is immutable, atomic or behind a mutex.
    let deadline: Instant
    let sequence: UInt64
    let loop: SluiceLoop?
    /// Dropped once the timer fires or is cancelled, so that what it captures is released.
    private let body: Mutex<(@Sendable () -> Void)?>
    private let cancelled = Atomic<Bool>(false)

    init(deadline: Instant, sequence: UInt64, loop: SluiceLoop?, body: @escaping @Sendable () -> Void) {
        self.deadline = deadline
        self.sequence = sequence
        self.loop = loop
        self.body = Mutex(body)
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() {
        cancelled.store(true, ordering: .releasing)
        body.withSanitizedLock { $0 = nil }
    }

    func fire() {
        let run = body.withSanitizedLock { body -> (@Sendable () -> Void)? in
            defer { body = nil }
            return body
        }
        if !isCancelled { run?() }
    }

    static func < (lhs: ManualTimer, rhs: ManualTimer) -> Bool {
        (lhs.deadline, lhs.sequence) < (rhs.deadline, rhs.sequence)
    }

    static func == (lhs: ManualTimer, rhs: ManualTimer) -> Bool {
        lhs === rhs
    }
}
