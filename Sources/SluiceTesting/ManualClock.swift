import SluiceCore

/// A clock that moves only when told to: tests supply `now` without sleeping.
public struct ManualClock: Hashable, Sendable {
    /// The current instant.
    public private(set) var now: Instant

    /// A clock reading `start`.
    public init(start: Instant = .zero) {
        self.now = start
    }

    /// Moves the clock forward by `duration`.
    ///
    /// - Precondition: `duration >= .zero` (monotonic time never goes back).
    public mutating func advance(by duration: Duration) {
        precondition(duration >= .zero, "ManualClock cannot go back in time")
        now = now + duration
    }

    /// Moves the clock forward to `instant` (no-op if it is already there or later).
    public mutating func advance(to instant: Instant) {
        if instant > now { now = instant }
    }
}
