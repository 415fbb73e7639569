import CoreMetrics
import SluiceCore
import SluiceLibevent

/// The budget, sweeps, tallies, the commit guard, the drain and the statistics.
extension PluginLane {
    @inlinable
    func charge(_ bytes: Int, now: Instant) -> Bool {
        stage.charge(bytes, now: now)
    }

    @inlinable
    func release(_ bytes: Int) {
        stage.release(bytes)
    }

    // MARK: - Upkeep

    @usableFromInline func sweep(now: Instant, maxEntries: Int) {
        stage.sweep(now: now, maxEntries: maxEntries)
        limits.sweep(now: now, maxEntries: maxEntries)
        reportMetrics()
    }

    /// Adds the outcomes counted since the last report, and the policy table's evictions and
    /// summary, to the plugin's swift-metrics instruments (call with the lock held).
    @usableFromInline func reportMetrics() {
        metrics.report(&decisions)
        if let stats = tableStats { tableMetrics.report(stats) }
    }

    @inlinable
    func incrementTally(key: String, by amount: Int, now: Instant) -> Int {
        if tally == nil {
            tally = try? KeyTable(budget: tallyBudget, whenFull: .evict)
        }
        return tally?.incrementCount(of: key, by: amount, now: now) ?? 0
    }


    /// The commit guard (see ``EffectContext/commit()``).
    @usableFromInline
    func commit(_ token: EventToken, shard: GateShard) -> Result<EffectRecord?, CommitRefusal> {
        // Read in place: this runs in code generic over the plugin, where a copy of the
        // execution (and its release) goes through its type's runtime metadata.
        guard let reason = executions.update(token, { $0.cancellationReason }) else {
            return .failure(
                CommitRefusal(code: .notRunning, message: "the effect is not running under the gate", value: "\(token.rawValue)"))
        }
        if let reason {
            return .failure(
                CommitRefusal(code: .cancelled, message: "the effect was cancelled before its commit point", value: "\(reason)"))
        }
        if shared != nil, let refusal = sharedLeaseRefusal(token, shard: shard) { return .failure(refusal) }
        let record = executions.update(token) { execution in
            execution.committed = true
            return execution.idempotencyRecord
        }
        guard let record = record ?? nil else { return .success(nil) }
        return .success(effectRecord(of: token, key: record.key, record: record.record))
    }

    /// The record of an idempotent execution and the fence it holds: its shared lease's, or
    /// for a record in this process's table, one made from its token (``LocalFence``).
    @usableFromInline
    func record(of token: EventToken, shard: GateShard) -> EffectRecord? {
        let record = executions.update(token) { $0.idempotencyRecord }
        guard let record = record ?? nil else { return nil }
        return effectRecord(of: token, key: record.key, record: record.record)
    }

    /// The record `record` of key `key` that idempotent execution `token` runs, with its fence.
    func effectRecord(of token: EventToken, key: String, record: String) -> EffectRecord {
        let fence = shared?.held[token]?.lease.fence ?? LocalFence.of(token)
        return EffectRecord(plugin: handle.plugin.name, key: key, record: record, fence: fence)
    }

    @inlinable
    func drain(reason: CancellationReason, shard: GateShard) {
        for timer in timers.values { timer.cancel() }
        timers.removeAll()
        let tokens = executions.keys.sorted { $0.rawValue < $1.rawValue }
        for token in tokens {
            if let execution = executions[token], execution.committed, !execution.isCancelling {
                // Past its commit point: it finishes, its result is stored (and written to a
                // shared store), and its callers are answered with it.
                continue
            }
            if let execution = executions[token], execution.kind == .idempotent, holdsSharedLease(token) {
                // A payment holding a shared record may have committed already: its callers are
                // answered, but it is kept (and its lease renewed) until its task ends, so that
                // its result is still written, or its record given back if it did not commit.
                // Giving the record back now would let another instance charge it again.
                executions.update(token) {
                    $0.state = .cancelling(reason)
                    $0.joiners = []
                }
                shard.cancelLater(execution.task)
                shard.countCancelled()
                answer(execution.leader, with: .cancelled(reason), shard: shard)
                for joiner in execution.joiners { answer(joiner, with: .cancelled(reason), shard: shard) }
                continue
            }
            guard let execution = executions.remove(token) else { continue }
            release(Self.executionBytes)
            endLimits(of: execution, now: shard.now)
            shard.executionEnded()
            shard.cancelLater(execution.task)
            if execution.kind == .idempotent { records?.value.cancel(key: execution.record, owner: token) }
            if execution.kind != .single { shard.finishEntry(token) }
            shard.countCancelled()
            let joiners = execution.kind == .singleFlight
                ? (flights.forget(key: execution.record)?.joiners ?? []) + execution.joiners : execution.joiners
            answer(execution.leader, with: .cancelled(reason), shard: shard)
            for joiner in joiners { answer(joiner, with: .cancelled(reason), shard: shard) }
        }
        switchLatest = SwitchLatest()
        flights = SingleFlight()
        drainShared(reason: reason, shard: shard)
    }

    @inlinable
    var keyCount: Int {
        stage.keyCount
    }

    @usableFromInline var limitKeyCount: Int { limits.keyCount }

    @inlinable
    var executionCount: Int { executions.count }

    @inlinable
    var waiterCount: Int { waiters.count }

    @inlinable
    var tableStats: KeyTableStats? {
        stage.tableStats
    }
}
