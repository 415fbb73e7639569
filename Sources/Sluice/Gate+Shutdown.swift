import Logging
import ServiceLifecycle
import SluiceCore
import SluiceLibevent
import Synchronization

/// Draining and stopping, and running the loops' part of it.
extension Gate {
    /// Stops taking requests (they get ``GateOutcome/shuttingDown``), waits up to `gracePeriod`
    /// (on the gate's clock; ``GateOptions/shutdownGracePeriod`` when `nil`) for held and
    /// running effects to end, then cancels every effect that has not passed its commit point
    /// (``EffectContext/commit()``) and answers it with ``CancellationReason/shutdown`` (a
    /// shared store's record is given back), and stops the sweeps. Then it waits, up to
    /// ``GateOptions/shutdownSettleTimeout``, for the committed effects to finish (their callers
    /// get their results) and for every result and record release to reach the shared store;
    /// what is still pending after that is counted in one log line. The loops keep running:
    /// shut the group down after (and close a shared store before that). Calling it again
    /// returns at once.
    public func shutdown(gracePeriod: Duration? = nil) async {
        guard !shutdownBegun.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let grace = gracePeriod ?? options.shutdownGracePeriod
        logger.info("draining", metadata: ["grace": "\(grace)"])
        let signal = DrainSignal(shards: shards.count)
        // The grace period is measured on the gate's clock from here, before requests are
        // refused: whoever sees the gate refusing knows the deadline is set.
        var timer: (any GateTimer)?
        if grace > .zero {
            timer = await perform(on: shards[0]) { shard in
                shard.clock.schedule(at: shard.clock.now + grace) { signal.graceOver() }
            }
        }
        if timer == nil { signal.graceOver() }
        lifecycle.store(Lifecycle.draining, ordering: .releasing)
        for shard in shards where await perform(on: shard, { $0.beginDrain(signal) }) == nil {
            signal.shardIsIdle()
        }
        await signal.wait()
        timer?.cancel()
        for shard in shards {
            _ = await perform(on: shard) { $0.finishDrain() }
        }
        await settle()
        lifecycle.store(Lifecycle.stopped, ordering: .releasing)
        logger.info("drained")
    }

    /// Waits for committed effects to end and for results and releases to reach the store, up
    /// to the settle timeout (polled: this runs once, at shutdown).
    private func settle() async {
        let deadline = ContinuousClock.now + options.shutdownSettleTimeout
        while true {
            var executions = 0
            var storeOperations = 0
            for shard in shards {
                guard let counts = await perform(on: shard, { ($0.executionCount, $0.storeOperationsPending) }) else { continue }
                executions += counts.0
                storeOperations += counts.1
            }
            if executions == 0 && storeOperations == 0 { return }
            if ContinuousClock.now >= deadline {
                logger.warning(
                    "shutting down with work unsettled: records left to their leases",
                    metadata: ["effects": "\(executions)", "store-operations": "\(storeOperations)"])
                return
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The swift-service-lifecycle entry point: waits for a graceful shutdown, then drains
    /// (``shutdown(gracePeriod:)``). The group is the caller's to shut down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Runs `body` with `shard` on its loop: at once when called there, else after one hop.
    /// `nil` when the loop has stopped.
    func perform<Result: Sendable>(
        on shard: GateShard, _ body: @escaping @Sendable (GateShard) -> Result
    ) async -> Result? {
        if shard.loop.inEventLoop { return shard.withLock { body(shard) } }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Result?, Never>) in
            let accepted = shard.loop.executeIfRunning {
                continuation.resume(returning: shard.withLock { body(shard) })
            }
            if !accepted { continuation.resume(returning: nil) }
        }
    }
}
