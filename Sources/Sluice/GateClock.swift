import SluiceCore
import SluiceLibevent

/// Where a gate shard reads `now` and arms timers. On a server it is the shard's loop
/// (``LoopGateClock``); in plugin tests a manual clock stands in, so no test waits for real time.
///
/// Both members may be used from any thread (a decision runs where its caller is); a timer's
/// body runs on the shard's loop.
public protocol GateClock: Sendable {
    /// The current instant.
    var now: Instant { get }
    /// The current instant read at this moment, never a time cached earlier (a loop's time is
    /// read once per iteration, and the thread may have stalled since): what the commit guard
    /// reads, so that a lease which ran out during a stall is seen to have run out. ``now`` by
    /// default.
    var freshNow: Instant { get }
    /// Runs `body` on the shard's loop once `deadline` has passed, unless cancelled first.
    func schedule(at deadline: Instant, _ body: @escaping @Sendable () -> Void) -> any GateTimer
}

/// A timer armed by a ``GateClock``.
public protocol GateTimer: Sendable {
    /// The instant it fires at.
    var deadline: Instant { get }
    /// Cancels it: once this returns, its body will not run.
    func cancel()
}

extension GateClock {
    public var freshNow: Instant { now }
}

extension LoopTimer: GateTimer {}

/// The production clock: the loop's cached monotonic time on its thread (a fresh read of the
/// same clock elsewhere), and loop timers.
public struct LoopGateClock: GateClock {
    /// The loop.
    public let loop: SluiceLoop

    /// A clock for `loop`.
    public init(loop: SluiceLoop) {
        self.loop = loop
    }

    public var now: Instant { loop.inEventLoop ? loop.now : SluiceLoop.monotonicNow() }

    public var freshNow: Instant { loop.currentTime }

    public func schedule(at deadline: Instant, _ body: @escaping @Sendable () -> Void) -> any GateTimer {
        loop.schedule(at: deadline, body)
    }
}
