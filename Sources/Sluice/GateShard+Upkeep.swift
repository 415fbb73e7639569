import SluiceCore
import SluiceLibevent

/// Sweeping idle keys, draining at shutdown, and the statistics.
extension GateShard {
    /// Starts the periodic sweep of idle keys. Call on the loop.
    func startSweeping() {
        withLock {
            sweepTimer = clock.schedule(at: now + options.sweepInterval) { [self] in
                self.sweep()
            }
        }
    }

    /// Stops the periodic sweep.
    func stopSweeping() {
        withLock {
            sweepTimer?.cancel()
            sweepTimer = nil
        }
    }

    func sweep() {
        withLock {
            guard sweepTimer != nil else { return }
            let now = self.now
            for lane in lanes { lane.sweep(now: now, maxEntries: options.sweepBatch) }
            startSweeping()
        }
    }

    /// The gate began to drain: `signal` hears when this shard has no execution left.
    func beginDrain(_ signal: DrainSignal) {
        withLock {
            isDraining = true
            if executionCount == 0 {
                signal.shardIsIdle()
            } else {
                drainSignal = signal
            }
        }
    }

    /// An execution ended (or was dropped).
    @usableFromInline
    func executionEnded() {
        guard let signal = drainSignal, executionCount == 0 else { return }
        drainSignal = nil
        signal.shardIsIdle()
    }

    /// The grace period is over: cancels and answers everything left, and stops sweeping.
    func finishDrain() {
        withLock {
            isDraining = true
            drainSignal = nil
            for lane in lanes {
                lane.drain(reason: .shutdown, shard: self)
                lane.reportMetrics()
            }
            stopSweeping()
        }
    }

    /// Keys held in each plugin's policy table, and (counted by the first shard, since every
    /// shard shares them) in the tables of its limits.
    var keyCountByLane: [Int] { lanes.map { $0.keyCount + (index == 0 ? $0.limitKeyCount : 0) } }

    /// Executions held or running.
    var executionCount: Int { lanes.reduce(0) { $0 + $1.executionCount } }

    /// Results and record releases on their way to a shared store.
    var storeOperationsPending: Int { lanes.reduce(0) { $0 + $1.storeOperationsPending } }

    /// Requests waiting for a result.
    var waiterCount: Int { lanes.reduce(0) { $0 + $1.waiterCount } }

    /// Open local scopes (the root included).
    var scopeCount: Int { tree.scopeCount }

    /// Each plugin's policy table counters, in registration order.
    var tableStats: [KeyTableStats?] { lanes.map(\.tableStats) }
}
