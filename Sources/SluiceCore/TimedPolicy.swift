/// A timed policy for one key: its options plus its state (``Throttle``, ``Debounce``).
public struct TimedPolicy<State: TimedPolicyState> {
    /// The options every decision uses.
    public let options: State.Options
    /// The current state.
    public var state = State()

    /// A policy with no history.
    public init(options: State.Options) {
        self.options = options
    }

    /// Decides what happens to the event `token` arriving at `now`.
    @inlinable
    public mutating func event(_ token: EventToken, now: Instant) -> Decision {
        state.event(token, now: now, options: options)
    }

    /// Delivers a timer requested earlier.
    @inlinable
    public mutating func fire(now: Instant) -> FireDecision {
        state.fire(now: now, options: options)
    }
}

extension TimedPolicy: Equatable where State: Equatable, State.Options: Equatable {}
extension TimedPolicy: Hashable where State: Hashable, State.Options: Hashable {}
extension TimedPolicy: Sendable where State: Sendable, State.Options: Sendable {}
