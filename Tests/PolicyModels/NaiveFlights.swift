import SluiceCore

/// A naive single-flight: per key, the leader, whether it still waits, and the joiners still
/// waiting in arrival order. Each call returns what ``SingleFlight`` must answer.
///
/// The reference of the property tests and of the flight fuzz target.
public struct NaiveFlights<Key: Hashable> {
    public struct Flight: Equatable {
        public var leader: UInt64
        public var leaderWaits: Bool
        public var joiners: [UInt64]
        public var waiters: Int { joiners.count + (leaderWaits ? 1 : 0) }
    }

    public private(set) var flights: [Key: Flight] = [:]

    public init() {}

    public var count: Int { flights.count }

    public subscript(key: Key) -> Flight? { flights[key] }

    /// A request: it leads when nothing runs for `key`, else joins the leader.
    public mutating func begin(_ token: UInt64, key: Key) -> SingleFlightDecision {
        if let flight = flights[key] {
            flights[key]?.joiners.append(token)
            return .join(leader: EventToken(flight.leader))
        }
        flights[key] = Flight(leader: token, leaderWaits: true, joiners: [])
        return .lead
    }

    /// A completion by `leader`: the joiners still waiting get the result, when it is the leader.
    public mutating func complete(key: Key, leader: UInt64) -> [EventToken] {
        guard let flight = flights[key], flight.leader == leader else { return [] }
        flights[key] = nil
        return flight.joiners.map(EventToken.init)
    }

    /// Forgets `key`'s flight, returning it.
    public mutating func forget(key: Key) -> Flight? {
        defer { flights[key] = nil }
        return flights[key]
    }

    /// `token` leaves `key`'s flight.
    public mutating func leave(_ token: UInt64, key: Key) -> SingleFlightLeave {
        guard var flight = flights[key] else { return .notWaiting }
        if flight.leader == token && flight.leaderWaits {
            flight.leaderWaits = false
        } else if let index = flight.joiners.firstIndex(of: token) {
            flight.joiners.remove(at: index)
        } else {
            return .notWaiting
        }
        if flight.waiters == 0 {
            flights[key] = nil
            return .abandoned(leader: EventToken(flight.leader))
        }
        flights[key] = flight
        return .stillShared(remaining: flight.waiters)
    }

    /// How many wait for `key`'s flight.
    public func waiterCount(for key: Key) -> Int { flights[key]?.waiters ?? 0 }
}
