/// The per-key state of a throttle: at most one run per window of `interval`.
///
/// Semantics (lodash's and Combine's options together):
///
/// - A *window* opens when an event runs at its leading edge, when a trailing run happens, or (trailing
///   only) when the first event arrives while no window is open. It lasts `interval`.
/// - **Leading only** (a button tap's throttle): an event at `t` runs iff nothing ran in
///   `(t − I, t]`; otherwise it is dropped with `retryAfter = lastRun + I − t`. No timers.
/// - **With trailing**: an event inside an open window is *held*; the policy requests a timer at the
///   window's end. With ``ThrottleOptions/TrailingDelivery/latest`` a newer event supersedes the held
///   one; with ``ThrottleOptions/TrailingDelivery/first`` later events are dropped. When the timer
///   fires, the held event runs and a new window opens at that instant (RxJS/lodash: a trailing run
///   starts a new window). With leading and trailing, a trailing run happens only if the window saw at
///   least two events.
/// - A window holding an event stays open until its timer is delivered through ``fire(now:options:)``;
///   the runtime delivers due timers before events read at the same instant.
///
/// The struct is 24 bytes; a key table stores one per key.
public struct ThrottleState: Hashable, Sendable {
    /// End of the current window (exclusive), or `Int64.min` if none was ever opened.
    @usableFromInline var windowEnd: Int64
    @usableFromInline var pendingRaw: UInt64
    @usableFromInline var hasPending: Bool

    /// A key that has never seen an event.
    @inlinable
    public init() {
        windowEnd = Instant.noneNanos
        pendingRaw = 0
        hasPending = false
    }

    /// Decides what happens to the event `token` arriving at `now`.
    @inlinable
    public mutating func event(_ token: EventToken, now: Instant, options: ThrottleOptions) -> Decision {
        let t = now.nanoseconds
        let isOpen = windowEnd != Instant.noneNanos && (t < windowEnd || hasPending)
        if !isOpen {
            windowEnd = t.saturatingAdd(options.intervalNanos)
            if options.leading {
                return .run
            }
            pendingRaw = token.rawValue
            hasPending = true
            return .hold(schedule: Instant(nanoseconds: windowEnd), superseded: nil)
        }
        guard options.trailing else {
            return .drop(retryAfter: .nanoseconds(windowEnd &- t))
        }
        guard hasPending else {
            pendingRaw = token.rawValue
            hasPending = true
            return .hold(schedule: Instant(nanoseconds: windowEnd), superseded: nil)
        }
        switch options.delivers {
        case .latest:
            let old = EventToken(pendingRaw)
            pendingRaw = token.rawValue
            return .hold(schedule: nil, superseded: old)
        case .first:
            return .drop(retryAfter: .nanoseconds(Swift.max(0, windowEnd &- t)))
        }
    }

    /// Delivers the timer requested by a `.hold(schedule:…)` decision.
    @inlinable
    public mutating func fire(now: Instant, options: ThrottleOptions) -> FireDecision {
        guard hasPending else { return .none }
        let t = now.nanoseconds
        if t < windowEnd { return .reschedule(Instant(nanoseconds: windowEnd)) }
        hasPending = false
        windowEnd = t.saturatingAdd(options.intervalNanos)
        return .run(EventToken(pendingRaw))
    }

    /// The instant of the outstanding timer this state needs, if it holds an event.
    @inlinable
    public var deadline: Instant? {
        hasPending ? Instant(nanoseconds: windowEnd) : nil
    }

    /// The held event, if any.
    @inlinable
    public var pending: EventToken? {
        hasPending ? EventToken(pendingRaw) : nil
    }
}

extension ThrottleState: KeyedState {
    /// True when the state is indistinguishable from a fresh one at `now` (no held event, window
    /// over), so a table may drop it.
    @inlinable
    public func isIdle(at now: Instant) -> Bool {
        !hasPending && now.nanoseconds >= windowEnd
    }
}

extension ThrottleState: RestrictingState {
    /// The end of the open window, while it is ahead of `now`. A held event is not part of it:
    /// a table that evicts the key drops (and answers) the held event.
    @inlinable
    public func restriction(at now: Instant) -> Instant? {
        windowEnd > now.nanoseconds ? Instant(nanoseconds: windowEnd) : nil
    }

    /// A window open until `until`, holding nothing.
    @inlinable
    public init(restrictedUntil until: Instant) {
        windowEnd = until.nanoseconds
        pendingRaw = 0
        hasPending = false
    }
}

/// A throttle for one key: ``ThrottleOptions`` plus a ``ThrottleState``.
public typealias Throttle = TimedPolicy<ThrottleState>
