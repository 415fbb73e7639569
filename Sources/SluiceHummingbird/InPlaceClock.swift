#if Hummingbird
import Sluice
import SluiceCore

/// Where a rule decided in place reads the time: a `GateClock` it was given (a test's manual
/// clock), or the monotonic clock.
struct InPlaceClock: Sendable {
    private let clock: (any GateClock)?
    private let start = ContinuousClock.now

    /// Decisions between two sweeps of idle keys, and keys a sweep looks at.
    static let sweepEvery: UInt64 = 1024
    static let sweepBatch = 256

    init(_ clock: (any GateClock)?) {
        self.clock = clock
    }

    /// Now: the given clock's, or the monotonic time since this clock was made (plus a second,
    /// so that no decision is made at the zero instant).
    var now: Instant {
        if let clock { return clock.now }
        let elapsed = (ContinuousClock.now - start).components
        return Instant(nanoseconds: 1_000_000_000 + elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
    }
}
#endif
