/// A point on a monotonic timeline, in nanoseconds from an arbitrary origin.
///
/// Policies never read a clock: the caller passes `now`. The libevent loop supplies its cached
/// monotonic time; tests supply plain numbers (`Instant(milliseconds: 250)`).
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the timeline's origin.
    public var nanoseconds: Int64

    /// An instant `nanoseconds` after the origin.
    @inlinable
    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    /// An instant `milliseconds` after the origin (convenient in tests).
    @inlinable
    public init(milliseconds: Int64) {
        self.nanoseconds = milliseconds * 1_000_000
    }

    /// The origin of the timeline.
    public static let zero = Instant(nanoseconds: 0)

    /// Whether `lhs` comes before `rhs`.
    @inlinable
    public static func < (lhs: Instant, rhs: Instant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The instant `duration` after `lhs`.
    @inlinable
    public static func + (lhs: Instant, rhs: Duration) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds &+ rhs.nanosecondsClamped)
    }

    /// The instant `duration` before `lhs`.
    @inlinable
    public static func - (lhs: Instant, rhs: Duration) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds &- rhs.nanosecondsClamped)
    }

    /// The time from `rhs` to `lhs` (negative when `lhs` is earlier).
    @inlinable
    public static func - (lhs: Instant, rhs: Instant) -> Duration {
        .nanoseconds(lhs.nanoseconds &- rhs.nanoseconds)
    }

    public var description: String {
        "Instant(\(nanoseconds)ns)"
    }
}

extension Duration {
    /// This duration in whole nanoseconds, clamped to `Int64`'s range (about ±292 years).
    @inlinable
    public var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (secondsNanos, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflow2) = secondsNanos.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return total
    }
}
