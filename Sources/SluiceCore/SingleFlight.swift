/// What single-flight decides about a request.
public enum SingleFlightDecision: Hashable, Sendable {
    /// No execution is running for the key: this request leads one.
    case lead
    /// An execution is running: wait for it and share its result.
    case join(leader: EventToken)
}

/// Single-flight bookkeeping (Go's `singleflight`): concurrent requests for a key join the running
/// execution and share its result; nothing is kept after it completes.
///
/// The runtime holds results and continuations; this type says who leads, who joins, and whom to
/// hand the leader's result (success, error or cancellation alike) when it completes.
public struct SingleFlight<Key: Hashable> {
    @usableFromInline
    struct Flight {
        @usableFromInline var leader: EventToken
        @usableFromInline var joiners: [EventToken]
        @inlinable init(leader: EventToken) {
            self.leader = leader
            self.joiners = []
        }
    }

    @usableFromInline var flights: [Key: Flight] = [:]

    /// No execution running.
    public init() {}

    /// Executions running.
    public var count: Int { flights.count }

    /// The leader of the execution running for `key`, if any.
    public func leader(for key: Key) -> EventToken? {
        flights[key]?.leader
    }

    /// Decides whether request `token` for `key` leads a new execution or joins the running one.
    @inlinable
    public mutating func begin(_ token: EventToken, key: Key) -> SingleFlightDecision {
        if let leader = flights[key]?.leader {
            flights[key]!.joiners.append(token)
            return .join(leader: leader)
        }
        flights[key] = Flight(leader: token)
        return .lead
    }

    /// The leader's execution finished: forget the key.
    ///
    /// - Returns: the joined requests, in arrival order, that share the result; empty if `leader`
    ///   does not lead the execution for `key` (for example after ``forget(key:)``).
    @inlinable
    public mutating func complete(key: Key, leader: EventToken) -> [EventToken] {
        guard let flight = flights[key], flight.leader == leader else { return [] }
        flights[key] = nil
        return flight.joiners
    }

    /// Forgets the running execution for `key`, so the next request leads a new one (Go's `Forget`).
    ///
    /// - Returns: the requests that had joined it; the runtime still hands them the old result.
    @inlinable
    @discardableResult
    public mutating func forget(key: Key) -> (leader: EventToken, joiners: [EventToken])? {
        guard let flight = flights.removeValue(forKey: key) else { return nil }
        return (flight.leader, flight.joiners)
    }
}

extension SingleFlight: Sendable where Key: Sendable {}
extension SingleFlight.Flight: Sendable {}
