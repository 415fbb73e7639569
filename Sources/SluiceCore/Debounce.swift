/// The per-key state of a debounce: run once the key has been quiet for `quiet`.
///
/// Semantics (lodash's `debounce` options):
///
/// - A *burst* starts with an event while no burst is active and lasts until `quiet` passes with no
///   newer event. Every event restarts the quiet period.
/// - **Trailing** (default): each event is held; a newer event *supersedes* the held one at the moment
///   it arrives (the decision names it). The held event runs when the quiet period ends, or — with
///   `maxWait` — no later than `maxWait` after the burst's first event (after a `maxWait` run, the clock
///   restarts at that run and the burst continues).
/// - **Leading**: the burst's first event runs at once; with trailing as well, a trailing run happens
///   only if the burst saw at least two events. Leading only: later events of the burst are dropped,
///   except that with `maxWait` an event at least `maxWait` after the burst's last run runs.
/// - Timers are requested, never started: a `.hold(schedule:)` asks for ``fire(now:options:)`` at that
///   instant; a fire that comes before the (since extended) deadline answers `.reschedule`.
public struct DebounceState: Hashable, Sendable {
    @usableFromInline var quietEnd: Int64
    @usableFromInline var maxEnd: Int64
    @usableFromInline var timerAt: Int64
    @usableFromInline var pendingRaw: UInt64
    @usableFromInline var hasPending: Bool

    /// A key that has never seen an event.
    @inlinable
    public init() {
        quietEnd = Instant.noneNanos
        maxEnd = Instant.noneNanos
        timerAt = Instant.noneNanos
        pendingRaw = 0
        hasPending = false
    }

    @inlinable
    mutating func requestTimer(at deadline: Int64) -> Instant? {
        if timerAt == Instant.noneNanos || deadline < timerAt {
            timerAt = deadline
            return Instant(nanoseconds: deadline)
        }
        return nil
    }

    /// Decides what happens to the event `token` arriving at `now`.
    @inlinable
    public mutating func event(_ token: EventToken, now: Instant, options: DebounceOptions) -> Decision {
        let t = now.nanoseconds
        let inBurst = quietEnd != Instant.noneNanos && (t < quietEnd || hasPending)
        quietEnd = t.saturatingAdd(options.quietNanos)
        if !inBurst {
            maxEnd = t.saturatingAdd(options.maxWaitNanos)
            if options.leading {
                return .run
            }
            pendingRaw = token.rawValue
            hasPending = true
            return .hold(schedule: requestTimer(at: Swift.min(quietEnd, maxEnd)), superseded: nil)
        }
        if options.trailing {
            let old: EventToken? = hasPending ? EventToken(pendingRaw) : nil
            pendingRaw = token.rawValue
            hasPending = true
            return .hold(schedule: requestTimer(at: Swift.min(quietEnd, maxEnd)), superseded: old)
        }
        // Leading only.
        if t >= maxEnd {
            maxEnd = t.saturatingAdd(options.maxWaitNanos)
            return .run
        }
        return .drop(retryAfter: .nanoseconds(Swift.min(quietEnd, maxEnd) &- t))
    }

    /// Delivers a timer requested by a `.hold(schedule:…)` or `.reschedule` decision.
    @inlinable
    public mutating func fire(now: Instant, options: DebounceOptions) -> FireDecision {
        let t = now.nanoseconds
        timerAt = Instant.noneNanos
        guard hasPending else { return .none }
        let due = Swift.min(quietEnd, maxEnd)
        if t < due {
            timerAt = due
            return .reschedule(Instant(nanoseconds: due))
        }
        hasPending = false
        if t < quietEnd {
            // A maxWait run: the burst goes on, and its maxWait clock restarts now.
            maxEnd = t.saturatingAdd(options.maxWaitNanos)
        }
        return .run(EventToken(pendingRaw))
    }

    /// The held event, if any.
    @inlinable
    public var pending: EventToken? {
        hasPending ? EventToken(pendingRaw) : nil
    }

    /// When the held event is due (the earlier of the quiet end and the maxWait end).
    @inlinable
    public var deadline: Instant? {
        hasPending ? Instant(nanoseconds: Swift.min(quietEnd, maxEnd)) : nil
    }
}

extension DebounceState: KeyedState {
    /// True when no event is held and the burst is over.
    @inlinable
    public func isIdle(at now: Instant) -> Bool {
        !hasPending && now.nanoseconds >= quietEnd
    }
}

/// A debounce for one key: ``DebounceOptions`` plus a ``DebounceState``.
public typealias Debounce = TimedPolicy<DebounceState>
