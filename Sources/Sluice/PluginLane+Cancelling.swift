import CoreMetrics
import SluiceCore
import SluiceLibevent

/// Cancelling executions and waiting requests, and the policy timers.
extension PluginLane {
    /// Switch-latest: cancels the key's running execution with this effect ID.
    @inlinable
    func cancelRunning(key: String, effectID: EffectID, shard: GateShard) {
        guard let running = switchLatest.running(key: key, effect: effectID) else { return }
        _ = cancelExecution(running, reason: .replaced, shard: shard)
    }

    /// Cancels an execution: a held one ends now and its waiters are answered; a running one has
    /// its task cancelled and its waiters hear how it ended (a task that commits despite the
    /// cancellation reports its result). Returns whether this call cancelled it.
    @inlinable
    func cancelExecution(_ token: EventToken, reason: CancellationReason, shard: GateShard) -> Bool {
        guard let execution = executions[token] else { return false }
        switch execution.state {
        case .cancelling:
            return false
        case .held:
            answerHeld(token, with: .cancelled(reason), shard: shard)
        case .running:
            executions.update(token) { $0.state = .cancelling(reason) }
            if execution.kind == .singleFlight, let forgotten = flights.forget(key: execution.record) {
                // New requests start a new flight; those that waited still get this one's end.
                executions.update(token) { $0.joiners = forgotten.joiners }
            }
            shard.cancelLater(execution.task)
        }
        shard.countCancelled()
        return true
    }

    /// A waiting request leaves its execution (its scope closed or cancelled it, or its caller
    /// went away). Returns whether that cancelled the execution.
    @inlinable
    func leave(_ token: EventToken, reason: CancellationReason, shard: GateShard) -> Bool {
        guard let waiter = waiters[token] else { return false }
        guard let execution = executions[waiter.execution] else {
            answer(token, with: .cancelled(reason), shard: shard)
            return false
        }
        switch execution.kind {
        case .single:
            return cancelExecution(waiter.execution, reason: reason, shard: shard)
        case .idempotent:
            // The execution lives in the key's scope: it runs on and stores its result.
            if execution.isCancelling { return false }
            answer(token, with: .cancelled(reason), shard: shard)
            return false
        case .singleFlight:
            if execution.isCancelling { return false }
            answer(token, with: .cancelled(reason), shard: shard)
            let flightToken = waiter.source == .executed ? waiter.execution : token
            if case .abandoned = flights.leave(flightToken, key: execution.record) {
                return cancelExecution(waiter.execution, reason: reason, shard: shard)
            }
            return false
        }
    }

    @inlinable
    func cancelEntry(_ token: EventToken, isExecution: Bool, reason: CancellationReason, shard: GateShard) -> Bool {
        if isExecution { return cancelExecution(token, reason: reason, shard: shard) }
        // A waiter of an execution already being cancelled hears how it ends.
        if let waiter = waiters[token], executions[waiter.execution]?.isCancelling == true { return false }
        return leave(token, reason: reason, shard: shard)
    }

    // MARK: - Timers

    @inlinable
    func armTimer(key: String, at deadline: Instant, shard: GateShard) {
        if let existing = timers[key] {
            // The earlier timer fires first and the policy reschedules it to the later instant.
            if existing.deadline <= deadline { return }
            existing.cancel()
        }
        let index = self.index
        timers[key] = shard.clock.schedule(at: deadline) { [shard] in
            shard.timerFired(lane: index, key: key, deadline: deadline)
        }
    }

    @inlinable
    func timerFired(key: String, deadline: Instant, shard: GateShard) {
        // The timer replaced since (its body was already on its way) fires for nothing.
        guard let current = timers[key], current.deadline == deadline else { return }
        timers[key] = nil
        let now = shard.now
        switch stage.fire(key: key, now: now) {
        case .run(let token):
            guard let execution = executions[token], case .held = execution.state else { return }
            if cancelInFlight { cancelRunning(key: key, effectID: execution.effectID, shard: shard) }
            // Its waiters have their completions already: nothing is answered through `submit`.
            launch(token, shard: shard)
        case .reschedule(let deadline):
            armTimer(key: key, at: deadline, shard: shard)
        case .none:
            break
        }
    }
}
