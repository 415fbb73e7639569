import CoreMetrics
import SluiceCore
import SluiceLibevent

/// Running executions: their tasks, their ends, and the outcomes their waiters get.
extension PluginLane {
    /// Marks held execution `token` running: the decision that leaves its caller to start its
    /// task once the shard's lock is released (``GateShard/submit(_:later:)`` does, or
    /// ``carryOut(_:later:shard:)`` queues it). Cancelled instead when it was not held.
    @inlinable
    func started(_ token: EventToken, shard: GateShard) -> Decision {
        guard let start = markRunning(token, shard: shard) else { return .decided(.cancelled(.requested)) }
        return .start(start)
    }

    /// Carries out `decision` where no caller starts a task (a store's answer, a decision made
    /// in a critical section that is not the outermost): an execution to start is queued for
    /// when the shard releases its lock, and its leading waiter gets `later`'s completion now.
    /// Returns the outcome when it is known, else `nil`.
    @inlinable
    func carryOut(_ decision: Decision, later: () -> Completion, shard: GateShard) -> GateOutcome<Output>? {
        switch decision {
        case .decided(let outcome):
            return outcome
        case .waiting:
            return nil
        case .start(let start):
            shard.launches.append((index, start.execution))
            waiters.update(start.leader) { $0.completion = later() }
            return nil
        }
    }

    /// The completion of `leader`, whose task its caller started after the decision: its
    /// outcome if it has one already (the effect ended, or it was cancelled, before this),
    /// else `nil` with `later`'s completion installed.
    @inlinable
    func installCompletion(_ leader: EventToken, later: () -> Completion) -> GateOutcome<Output>? {
        // One lookup, in place: a copy of the waiter would copy its parked outcome.
        let isParked = waiters.update(leader) { waiter -> Bool in
            guard waiter.parked == nil else { return true }
            waiter.completion = later()
            return false
        }
        guard let isParked else { return .cancelled(.requested) }
        guard isParked, let parked = waiters.remove(leader)?.parked else { return nil }
        release(Self.waiterBytes)
        return parked
    }

    /// Marks a held execution running and queues its task's start for when the shard releases
    /// its lock (an effect's code never runs under it). Returns the request that leads it, or
    /// `nil` if it was not held.
    @inlinable
    @discardableResult
    func launch(_ token: EventToken, shard: GateShard) -> EventToken? {
        guard let start = markRunning(token, shard: shard) else { return nil }
        shard.launches.append((index, token))
        return start.leader
    }

    /// Marks a held execution running (a switch-latest key cancels the one it replaces). `nil`
    /// if it was not held.
    @inlinable
    func markRunning(_ token: EventToken, shard: GateShard) -> Launch? {
        let replaced = executions.update(token) { execution -> (leader: EventToken, replaced: EventToken?)? in
            guard case .held = execution.state else { return nil }
            execution.state = .running
            let replaced = cancelInFlight ? switchLatest.start(token, key: execution.key, effect: execution.effectID) : nil
            return (execution.leader, replaced)
        }
        guard let marked = replaced ?? nil else { return nil }
        if let replaced = marked.replaced, replaced != token {
            _ = cancelExecution(replaced, reason: .replaced, shard: shard)
        }
        return Launch(execution: token, leader: marked.leader)
    }

    /// What the task of execution `token`, marked running and not started yet, needs (call with
    /// the lock held).
    @inlinable
    func effectStart(of token: EventToken) -> EffectStart? {
        executions.update(token) { execution -> EffectStart? in
            guard execution.task == nil, case .running = execution.state else { return nil }
            return EffectStart(execution: token, input: execution.input, key: execution.key, effectID: execution.effectID)
        } ?? nil
    }

    /// Starts the task of execution `token`, queued under the lock and now released. An
    /// execution cancelled before its start ends at once, its effect never run.
    @inlinable
    func startTask(_ token: EventToken, shard: GateShard) {
        shard.lock.lock()
        let start = effectStart(of: token)
        let cancelledBeforeStart = start == nil && executions.update(token, { $0.task == nil && $0.isCancelling }) == true
        shard.lock.unlock()
        if let start {
            let task = makeTask(start, shard: shard)
            if shard.withLock({ attach(task, to: token, shard: shard) }) { task.cancel() }
        } else if cancelledBeforeStart {
            shard.effectEnded(lane: index, execution: token, plugin: Plugin.self, result: .failure(CancellationError()))
        }
    }

    /// Starts the task of an execution marked running, with the shard's lock released: on the
    /// shard's loop the effect starts on this thread and runs until it first suspends (one that
    /// never suspends has ended when this returns); from another thread it starts on the loop.
    /// Its continuations run on the loop.
    @inlinable
    func makeTask(_ start: EffectStart, shard: GateShard) -> Task<Void, Never> {
        // The task captures little: the handle's storage (one reference), the input and the
        // context (which reaches the shard). Each branch writes its closure out, so that each
        // task allocates one context for it and no thunk around it.
        let storage = handle.storage
        let input = start.input
        let token = start.execution
        let context = EffectContext(key: start.key, effectID: start.effectID, shard: shard, lane: index, execution: token)
        let duration = metrics.effectDuration
        if shard.loop.inEventLoop {
            return Task.immediate(executorPreference: shard.loop) { @concurrent () async -> Void in
                await PluginLane<Plugin>.runEffect(storage, input, context: context, token: token, duration: duration)
            }
        } else {
            return Task(executorPreference: shard.loop) { @concurrent () async -> Void in
                await PluginLane<Plugin>.runEffect(storage, input, context: context, token: token, duration: duration)
            }
        }
    }

    /// Gives execution `token` the task just started for it (call with the lock held). Returns
    /// whether the task must be cancelled, once the lock is released: the execution is
    /// cancelling, or a drain dropped it while its task was starting (a task that ended
    /// already ignores the cancel; an execution that ended is simply gone).
    @inlinable
    func attach(_ task: Task<Void, Never>, to token: EventToken, shard: GateShard) -> Bool {
        executions.update(token) {
            $0.task = task
            return $0.isCancelling
        } ?? shard.isDraining
    }

    /// The body of an execution's task: runs the effect, records its duration (when a metrics
    /// backend keeps it), and reports its end to the shard.
    @inlinable
    static func runEffect(
        _ storage: PluginHandleStorage<Plugin>, _ input: Plugin.Input, context: EffectContext, token: EventToken,
        duration: Timer?
    ) async {
        let result: Result<Output, any Error>
        let start = duration == nil ? nil : ContinuousClock.now
        do {
            result = .success(try await storage.plugin.run(input, context: context))
        } catch {
            result = .failure(error)
        }
        if let duration, let start { duration.recordNanoseconds((ContinuousClock.now - start).nanosecondsClamped) }
        context.shard.effectEnded(lane: context.lane, execution: token, plugin: Plugin.self, result: result)
    }

    /// An execution's task returned: store its result if the policy keeps one, and answer its
    /// waiters.
    @inlinable
    func effectEnded(_ token: EventToken, result: Result<Output, any Error>, shard: GateShard) {
        guard let execution = executions.remove(token) else { return }
        release(Self.executionBytes)
        // Its concurrency slots are free before its callers hear of it.
        if execution.limits.holdsAnything { endLimits(of: execution, now: shard.now) }
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
            // Without a shared store nothing is held there: no call into code generic over the
            // plugin, which looks its types' metadata up on every call.
            if shared == nil || !finishShared(token, result: result, execution: execution, shard: shard) {
                // Its retention runs from now, read afresh, not from the loop's cached time.
                store(result, of: execution, token: token, now: shard.freshNow)
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
            completion = records?.value.complete(
                key: execution.record, owner: token, result: result, isError: handle.plugin.isFailure(output), now: now)
        case .failure(let error):
            if execution.isCancelling || Self.committedNothing(error) {
                // Cancelled (or refused by its commit guard) before committing: release the
                // record so a retry runs.
                records?.value.cancel(key: execution.record, owner: token)
                completion = nil
            } else {
                completion = records?.value.complete(key: execution.record, owner: token, result: result, isError: true, now: now)
            }
        }
        if completion == .released { recordQuota?.value.refund(key: execution.key, quantity: 1, now: now) }
    }

    @inlinable
    func outcome(
        _ result: Result<Output, any Error>, reason: CancellationReason?, source: RunInfo.Source, _ execution: Execution
    ) -> GateOutcome<Output> {
        // Joined duplicates spent nothing: only the execution's own request reports the limits.
        outcome(
            result, reason: reason, source: source, rateLimit: execution.rateLimit,
            limits: source == .executed ? execution.limits.reports : .none)
    }

    /// The outcome an effect's result gives: what it returned or threw, or how it was cancelled.
    @inlinable
    func outcome(
        _ result: Result<Output, any Error>, reason: CancellationReason?, source: RunInfo.Source,
        rateLimit: RateLimitDecision?, limits: LimitReports = .none
    ) -> GateOutcome<Output> {
        switch result {
        case .success(let output):
            var info = RunInfo(source: source, rateLimit: rateLimit)
            info.limitReports = limits
            return .ran(output, info)
        case .failure(let error):
            if let reason { return .cancelled(reason) }
            if error is CancellationError { return .cancelled(.byEffect) }
            // Its commit guard stopped it (its lease was not safe): nothing was done, and a
            // retry replays the record's result or runs it.
            if error is CommitRefusal { return .unavailable }
            var info = RunInfo(source: source, rateLimit: rateLimit)
            info.limitReports = limits
            return .failed(error, info)
        }
    }

    /// Whether an effect that threw `error` committed nothing: it was cancelled, or its commit
    /// guard refused it.
    @inlinable
    static func committedNothing(_ error: any Error) -> Bool {
        error is CancellationError || error is CommitRefusal
    }

    /// Gives a waiting request its outcome and forgets it: its completion is called once the
    /// shard releases its lock. A leading waiter whose completion is not installed yet keeps
    /// the outcome for ``installCompletion(_:later:)``.
    @inlinable
    func answer(_ waiter: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        // Read in place: a copy of the waiter costs more than the rest of this.
        guard let entry = waiters.update(waiter, { (completion: $0.completion, isParked: $0.parked != nil) }) else { return }
        guard let completion = entry.completion else {
            if !entry.isParked {
                waiters.update(waiter) { $0.parked = outcome }
                shard.finishEntry(waiter)
            }
            return
        }
        waiters.delete(waiter)
        release(Self.waiterBytes)
        shard.finishEntry(waiter)
        deliver(completion, outcome, shard: shard)
    }

    /// Counts `outcome`, if there is one, among the lane's decisions (call with the lock held).
    @inlinable
    func count(_ outcome: GateOutcome<Output>?) {
        if let outcome { decisions.count(outcome) }
    }

    /// Calls `completion` with `outcome` once the shard releases its lock, counted.
    @inlinable
    func deliver(_ completion: @escaping Completion, _ outcome: GateOutcome<Output>, shard: GateShard) {
        decisions.count(outcome)
        outbox.append((completion, outcome))
        if outbox.count == 1 { shard.lanesToFlush.append(index) }
    }

    /// Takes the completions queued so far (called with the lock held).
    @inlinable
    func takeOutbox() -> any OutboxBatch {
        takeTypedOutbox()
    }

    /// ``takeOutbox()``, typed.
    @inlinable
    func takeTypedOutbox() -> LaneOutboxBatch<Output> {
        var items: [(Completion, GateOutcome<Output>)] = []
        swap(&items, &outbox)
        return LaneOutboxBatch(items: items)
    }

    /// Answers every waiter of a held execution and forgets it.
    @inlinable
    func answerHeld(_ token: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        guard let execution = executions[token], case .held = execution.state else { return }
        executions.delete(token)
        release(Self.executionBytes)
        // It never ran: everything it took from the limits goes back.
        endLimits(of: execution, now: shard.now)
        shard.executionEnded()
        if execution.kind != .single { shard.finishEntry(token) }
        answer(execution.leader, with: outcome, shard: shard)
        for joiner in execution.joiners { answer(joiner, with: outcome, shard: shard) }
    }
}
