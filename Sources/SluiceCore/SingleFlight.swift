/// What single-flight decides about a request.
public enum SingleFlightDecision: Hashable, Sendable {
    /// No execution is running for the key: this request leads one.
    case lead
    /// An execution is running: wait for it and share its result.
    case join(leader: EventToken)
}

/// What happened when a waiter left a flight (see ``SingleFlight/leave(_:key:)``).
public enum SingleFlightLeave: Hashable, Sendable {
    /// The request was not waiting on the key's flight: nothing changed.
    case notWaiting
    /// The request left; others still wait, so the shared work goes on.
    case stillShared(remaining: Int)
    /// The request was the last waiter: the flight led by `leader` is forgotten and its work
    /// should be cancelled (nobody wants its result).
    case abandoned(leader: EventToken)
}

/// Single-flight bookkeeping (Go's `singleflight`): concurrent requests for a key join the running
/// execution and share its result; nothing is kept after it completes.
///
/// The runtime holds results and continuations; this type says who leads, who joins, whom to
/// hand the leader's result (success, error or cancellation alike) when it completes, and when
/// the work has lost its last waiter. A waiter may leave (its connection closed, its task was
/// cancelled): the work is abandoned only when no waiter remains — one caller's cancellation
/// never fails the others.
public struct SingleFlight<Key: Hashable> {
    @usableFromInline
    struct Flight {
        @usableFromInline var leader: EventToken
        @usableFromInline var joiners: [EventToken]
        /// Whether the request that leads is still waiting for the result.
        @usableFromInline var leaderWaits: Bool
        @inlinable init(leader: EventToken) {
            self.leader = leader
            self.joiners = []
            self.leaderWaits = true
        }
        @inlinable var waiterCount: Int { joiners.count + (leaderWaits ? 1 : 0) }
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

    /// How many requests wait on the key's flight (0 when none runs).
    public func waiterCount(for key: Key) -> Int {
        flights[key]?.waiterCount ?? 0
    }

    /// Request `waiter` (the leader or a joiner) no longer waits for the key's flight.
    @inlinable
    public mutating func leave(_ waiter: EventToken, key: Key) -> SingleFlightLeave {
        guard var flight = flights[key] else { return .notWaiting }
        if waiter == flight.leader && flight.leaderWaits {
            flight.leaderWaits = false
        } else if let index = flight.joiners.firstIndex(of: waiter) {
            flight.joiners.remove(at: index)
        } else {
            return .notWaiting
        }
        if flight.waiterCount == 0 {
            flights[key] = nil
            return .abandoned(leader: flight.leader)
        }
        flights[key] = flight
        return .stillShared(remaining: flight.waiterCount)
    }

    /// The leader's execution finished: forget the key.
    ///
    /// - Returns: the joined requests still waiting, in arrival order, that share the result;
    ///   empty if `leader` does not lead the execution for `key` (for example after
    ///   ``forget(key:)`` or once it was abandoned).
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
