import SluiceCore

/// The timers a policy requested, fired in deadline order as a manual clock advances.
///
/// Policies never start timers: they return a deadline (`Decision.hold(schedule:)`,
/// `FireDecision.reschedule`). A runtime schedules those on its loop; a test schedules them here and
/// calls ``advance(to:_:)``, which moves the clock to each due deadline in turn (ties in the order they
/// were scheduled) and hands the timer's payload to `fire`, which may schedule more timers.
public struct ManualTimerQueue<Payload> {
    @usableFromInline
    struct Entry {
        var deadline: Instant
        var sequence: UInt64
        var payload: Payload
    }

    @usableFromInline var entries: [Entry] = []
    @usableFromInline var sequence: UInt64 = 0

    /// The clock the queue advances.
    public var clock: ManualClock

    /// An empty queue whose clock reads `start`.
    public init(start: Instant = .zero) {
        clock = ManualClock(start: start)
    }

    /// The current instant.
    public var now: Instant { clock.now }

    /// The number of timers not yet fired.
    public var count: Int { entries.count }

    /// The earliest outstanding deadline.
    public var nextDeadline: Instant? { entries.first?.deadline }

    /// Requests a timer at `deadline` carrying `payload`. A deadline in the past fires at the next
    /// ``advance(to:_:)``, at the current instant.
    public mutating func schedule(at deadline: Instant, _ payload: Payload) {
        let entry = Entry(deadline: deadline, sequence: sequence, payload: payload)
        sequence &+= 1
        let position = entries.firstIndex {
            ($0.deadline, $0.sequence) > (entry.deadline, entry.sequence)
        } ?? entries.endIndex
        entries.insert(entry, at: position)
    }

    /// Removes and returns the earliest timer due at `now`, if any (the clock does not move).
    public mutating func popDue() -> (deadline: Instant, payload: Payload)? {
        guard let first = entries.first, first.deadline <= clock.now else { return nil }
        entries.removeFirst()
        return (first.deadline, first.payload)
    }

    /// Fires, in order, every timer due at or before `instant`, moving the clock to each deadline
    /// (or leaving it where it is for overdue ones), then moves the clock to `instant`.
    ///
    /// `fire` gets the queue itself so it can schedule follow-up timers, which fire in the same call
    /// if they are due by `instant`.
    public mutating func advance(to instant: Instant, _ fire: (inout ManualTimerQueue, Instant, Payload) -> Void) {
        while let first = entries.first, first.deadline <= instant {
            entries.removeFirst()
            clock.advance(to: first.deadline)
            fire(&self, clock.now, first.payload)
        }
        clock.advance(to: instant)
    }

    /// ``advance(to:_:)`` by a duration.
    public mutating func advance(by duration: Duration, _ fire: (inout ManualTimerQueue, Instant, Payload) -> Void) {
        advance(to: clock.now + duration, fire)
    }
}

extension ManualTimerQueue: Sendable where Payload: Sendable {}
extension ManualTimerQueue.Entry: Sendable where Payload: Sendable {}
