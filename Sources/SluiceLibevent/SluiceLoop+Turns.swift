import SluiceCore

/// The queue of connections that have more to do than one turn.
///
/// A connection that used up its turn (its handler yielded) or read a full buffer stops
/// watching its socket and waits in this queue. Each pass of the loop first serves the sockets
/// that became ready, then this queue for at most ``turnPassBudget``; the rest of the queue
/// waits for the next pass. A client that sends a little between many that send much so waits
/// about one slice, not one turn of every busy connection; and the busy ones share the loop in
/// turn, none starved.
extension SluiceLoop {
    /// How long one pass serves the queue before the loop polls its sockets again.
    static let turnPassBudget = Duration.milliseconds(1)

    /// Queues `connection` for a turn in a later pass (loop thread only).
    func waitForTurn(_ connection: TCPConnection) {
        assertInEventLoop()
        scratch.turnWaiters.append(connection)
        armTurnPass()
    }

    private func armTurnPass() {
        guard !scratch.turnPassArmed else { return }
        scratch.turnPassArmed = true
        // A zero delay fires in the next pass, after libevent has polled the sockets.
        _ = schedule(after: .zero) { [self] in runTurnPass() }
    }

    private func runTurnPass() {
        scratch.turnPassArmed = false
        let ends = Self.monotonicNow() + Self.turnPassBudget
        // A connection that rejoins the queue during the pass waits for the next one.
        let end = scratch.turnWaiters.count
        while scratch.turnHead < end {
            let connection = scratch.turnWaiters[scratch.turnHead]
            scratch.turnHead += 1
            connection.resumeTurn()
            if Self.monotonicNow() >= ends { break }
        }
        if scratch.turnHead == scratch.turnWaiters.count {
            scratch.turnWaiters.removeAll(keepingCapacity: true)
            scratch.turnHead = 0
        } else if scratch.turnHead >= 1024, scratch.turnHead * 2 >= scratch.turnWaiters.count {
            scratch.turnWaiters.removeFirst(scratch.turnHead)
            scratch.turnHead = 0
        }
        if !scratch.turnWaiters.isEmpty {
            armTurnPass()
        }
    }

    /// Drops the queues of waiting connections (at shutdown, once every connection is closed).
    func dropConnectionQueues() {
        scratch.turnWaiters.removeAll()
        scratch.turnHead = 0
        scratch.budgetWaiters.removeAll()
    }
}
