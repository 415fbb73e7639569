import CoreMetrics
import SluiceCore
import SluiceLibevent

/// Running executions: their tasks, their ends, and the outcomes their waiters get.
extension PluginLane {
    /// Launches execution `token` and returns its outcome if it ended before this returns;
    /// otherwise gives its leading waiter the completion `later` makes.
    @inlinable
    func launchAndWait(_ token: EventToken, later: @Sendable () -> Completion, shard: GateShard) -> GateOutcome<Output>? {
        immediate = nil
        guard let leader = launch(token, shard: shard) else { return .cancelled(.requested) }
        submitting = nil
        if let outcome = immediate.take() {
            return outcome
        }
        guard waiters.update(leader, { $0.completion = later() }) != nil else { return .cancelled(.requested) }
        return nil
    }

    /// Starts a held execution's task. Returns the request that leads it, or `nil` if it was not
    /// held. While the task runs synchronously, that request is the one `submit` answers with
    /// the outcome, if the effect ends before it suspends.
    @inlinable
    @discardableResult
    func launch(_ token: EventToken, shard: GateShard) -> EventToken? {
        // Read what the task needs in place, and mark the execution running.
        let started = executions.update(token) {
            execution -> (key: String, input: Plugin.Input, effectID: EffectID, leader: EventToken)? in
            guard case .held = execution.state else { return nil }
            execution.state = .running
            return (execution.key, execution.input, execution.effectID, execution.leader)
        }
        guard let started = started ?? nil else { return nil }
        submitting = started.leader
        if cancelInFlight, let replaced = switchLatest.start(token, key: started.key, effect: started.effectID),
            replaced != token
        {
            _ = cancelExecution(replaced, reason: .replaced, shard: shard)
        }
        // The task captures little: the handle's storage (one reference), the input and the
        // context (which reaches the shard).
        let storage = handle.storage
        let input = started.input
        let context = EffectContext(key: started.key, effectID: started.effectID, shard: shard, lane: index, execution: token)
        let duration = metrics.effectDuration
        endedSynchronously = nil
        // Nonisolated and immediate: the effect starts on this thread now, and one that never
        // suspends has ended before `launch` returns. Its continuations run on the key's loop.
        let task = Task.immediate(executorPreference: shard.loop) { @concurrent () async -> Void in
            let result: Result<Output, any Error>
            let start = ContinuousClock.now
            do {
                result = .success(try await storage.plugin.run(input, context: context))
            } catch {
                result = .failure(error)
            }
            duration.recordNanoseconds((ContinuousClock.now - start).nanosecondsClamped)
            context.shard.effectEnded(lane: context.lane, execution: token, plugin: Plugin.self, result: result)
        }
        // An effect that never suspended has already ended (and is gone).
        if endedSynchronously != token {
            executions.update(token) { $0.task = task }
        }
        return started.leader
    }

    /// An execution's task returned: store its result if the policy keeps one, and answer its
    /// waiters.
    @inlinable
    func effectEnded(_ token: EventToken, result: Result<Output, any Error>, shard: GateShard) {
        guard let execution = executions.remove(token) else { return }
        endedSynchronously = token
        release(Self.executionBytes)
        // Its concurrency slots are free before its callers hear of it.
        endLimits(of: execution, now: shard.clock.now)
        shard.executionEnded()
        if cancelInFlight { switchLatest.finished(token, key: execution.key, effect: execution.effectID) }
        let reason = execution.cancellationReason
        switch execution.kind {
        case .single:
            answer(execution.leader, with: outcome(result, reason: reason, source: .executed, execution), shard: shard)
        case .idempotent:
            shard.finishEntry(token)
            // Read before the lease is forgotten.
            let awaitsRecord = shared != nil && awaitsRecord(token, result: result, reason: reason)
            if !finishShared(token, result: result, execution: execution, shard: shard) {
                store(result, of: execution, token: token, now: shard.clock.now)
            }
            if awaitsRecord {
                awaitRecord(of: execution, shard: shard)
                return
            }
            answer(execution.leader, with: outcome(result, reason: reason, source: .executed, execution), shard: shard)
            let shared = outcome(result, reason: reason, source: .joined, execution)
            for joiner in execution.joiners { answer(joiner, with: shared, shard: shard) }
        case .singleFlight:
            shard.finishEntry(token)
            let joiners = flights.complete(key: execution.record, leader: token) + execution.joiners
            answer(execution.leader, with: outcome(result, reason: reason, source: .executed, execution), shard: shard)
            let shared = outcome(result, reason: reason, source: .joined, execution)
            for joiner in joiners { answer(joiner, with: shared, shard: shard) }
        }
    }

    /// Completes or releases an idempotent execution's record. A record released because the
    /// options keep no errors holds nothing: its unit of the key's record quota is given back.
    @inlinable
    func store(_ result: Result<Output, any Error>, of execution: Execution, token: EventToken, now: Instant) {
        let completion: IdempotencyCompletion?
        switch result {
        case .success(let output):
            completion = idempotency?.complete(
                key: execution.record, owner: token, result: result, isError: handle.plugin.isFailure(output), now: now)
        case .failure(let error):
            if execution.isCancelling || Self.committedNothing(error) {
                // Cancelled (or refused by its commit guard) before committing: release the
                // record so a retry runs.
                idempotency?.cancel(key: execution.record, owner: token)
                completion = nil
            } else {
                completion = idempotency?.complete(key: execution.record, owner: token, result: result, isError: true, now: now)
            }
        }
        if completion == .released { recordQuota?.refund(key: execution.key, quantity: 1, now: now) }
    }

    @inlinable
    func outcome(
        _ result: Result<Output, any Error>, reason: CancellationReason?, source: RunInfo.Source, _ execution: Execution
    ) -> GateOutcome<Output> {
        // Joined duplicates spent nothing: only the execution's own request reports the limits.
        outcome(
            result, reason: reason, source: source, rateLimit: execution.rateLimit,
            limits: source == .executed ? execution.limits.reports : [])
    }

    /// The outcome an effect's result gives: what it returned or threw, or how it was cancelled.
    @inlinable
    func outcome(
        _ result: Result<Output, any Error>, reason: CancellationReason?, source: RunInfo.Source,
        rateLimit: RateLimitDecision?, limits: [RateStageReport] = []
    ) -> GateOutcome<Output> {
        switch result {
        case .success(let output):
            var info = RunInfo(source: source, rateLimit: rateLimit)
            if !limits.isEmpty { info.limits = limits }
            return .ran(output, info)
        case .failure(let error):
            if let reason { return .cancelled(reason) }
            if error is CancellationError { return .cancelled(.byEffect) }
            // Its commit guard stopped it (its lease was not safe): nothing was done, and a
            // retry replays the record's result or runs it.
            if error is CommitRefusal { return .unavailable }
            var info = RunInfo(source: source, rateLimit: rateLimit)
            if !limits.isEmpty { info.limits = limits }
            return .failed(error, info)
        }
    }

    /// Whether an effect that threw `error` committed nothing: it was cancelled, or its commit
    /// guard refused it.
    @inlinable
    static func committedNothing(_ error: any Error) -> Bool {
        error is CancellationError || error is CommitRefusal
    }

    /// Gives a waiting request its outcome and forgets it.
    @inlinable
    func answer(_ waiter: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        guard let entry = waiters.remove(waiter) else { return }
        release(Self.waiterBytes)
        shard.finishEntry(waiter)
        if let completion = entry.completion {
            metrics.count(outcome)
            completion(outcome)
        } else if waiter == submitting {
            immediate = outcome
        }
    }

    /// Answers every waiter of a held execution and forgets it.
    @inlinable
    func answerHeld(_ token: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        guard let execution = executions[token], case .held = execution.state else { return }
        executions.remove(token)
        release(Self.executionBytes)
        // It never ran: everything it took from the limits goes back.
        endLimits(of: execution, now: shard.clock.now)
        shard.executionEnded()
        if execution.kind != .single { shard.finishEntry(token) }
        answer(execution.leader, with: outcome, shard: shard)
        for joiner in execution.joiners { answer(joiner, with: outcome, shard: shard) }
    }
}
