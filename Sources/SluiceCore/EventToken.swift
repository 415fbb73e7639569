/// Names one event (one request) that a policy holds, runs or supersedes.
///
/// Policies never see payloads: the runtime gives every event a token, keeps the payload (and the
/// reply continuation) itself, and acts on the tokens a decision returns (run this one, reply
/// `SUPERSEDED` to that one).
public struct EventToken: Hashable, Sendable, CustomStringConvertible {
    /// The runtime's number for the event.
    public var rawValue: UInt64

    /// A token with the given number.
    @inlinable
    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "#\(rawValue)" }
}

/// What a policy decides about one incoming event.
public enum Decision: Hashable, Sendable {
    /// Run the event's effect now.
    case run
    /// Do not run the event; the same key can be tried again after `retryAfter`.
    case drop(retryAfter: Duration)
    /// Hold the event: it may run later, when a timer the policy requested fires.
    ///
    /// - `schedule`: when non-nil, the runtime must arrange for the policy's `fire(now:)` to be
    ///   called once `now >= schedule`. A `nil` schedule means a timer requested earlier is still
    ///   outstanding and covers this event.
    /// - `superseded`: the event this one replaced. It will never run; the runtime replies
    ///   `SUPERSEDED` to it now.
    case hold(schedule: Instant?, superseded: EventToken?)
}

/// What a policy decides when a timer it requested fires.
public enum FireDecision: Hashable, Sendable {
    /// Run the held event with this token now.
    case run(EventToken)
    /// The timer fired early for the policy's current state: call `fire(now:)` again at this instant.
    case reschedule(Instant)
    /// Nothing to do (a stale timer, or the state was already settled).
    case none
}
