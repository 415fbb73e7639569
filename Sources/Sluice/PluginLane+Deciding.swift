import CoreMetrics
import SluiceCore
import SluiceLibevent

/// Deciding about a request: each policy's decision, then the execution it admits (or the
/// effect it runs in place), charged to the budget and registered in the scopes.
extension PluginLane {
    @inlinable
    func submitRateLimit(
        _ request: GateRequest<Plugin>, keyHash: UInt32?, token: EventToken, table: StageState<RateLimitTable<String>>,
        shard: GateShard
    ) -> Decision {
        let cost = handle.plugin.cost(for: request.input)
        let now = shard.now
        let hash = keyHash ?? KeySlotPrefetcher.hash(request.key)
        guard let decision = try? table.value.check(key: request.key, hash: hash, now: now, quantity: cost) else {
            return .decided(.busy)
        }
        guard decision.allowed else {
            return .decided(.limited(LimitRefusal(stage: handle.plugin.name, verdict: .rate(decision))))
        }
        var pass = LimitPass.none
        if let refused = passLimits(request.input, now: now, into: &pass) {
            table.value.refund(key: request.key, quantity: cost, now: now)
            return .decided(refused)
        }
        if let outcome = runInPlace(request, rateLimit: decision, limits: pass, shard: shard) { return .decided(outcome) }
        if let refused = admit(request, token: token, kind: .single, record: "", limits: pass, shard: shard) {
            // Refused after the limiter allowed it (its budget is spent, or its scope closed
            // meanwhile): a refused request spends nothing.
            table.value.refund(key: request.key, quantity: cost, now: now)
            return .decided(refused)
        }
        executions.update(token) { $0.rateLimit = decision }
        return started(token, shard: shard)
    }

    // Inlined into each caller, where the state's type is known: code generic over the plugin
    // (`Gate.submit` called from another module's generic context) then still calls the table
    // of that very type, rather than looking its generic metadata up on every request.
    @inlinable @inline(__always)
    func submitTimed<State: TimedPolicyState>(
        _ request: GateRequest<Plugin>, keyHash: UInt32?, token: EventToken, table: StageState<TimedTable<String, State>>,
        later: () -> Completion, shard: GateShard
    ) -> Decision {
        let key = request.key
        let now = shard.now
        // libevent runs socket callbacks before the timers of the same iteration: deliver a timer
        // that is already due first, so the event sees the state it would have after it.
        if !timers.isEmpty, let timer = timers[key], timer.deadline <= now {
            timer.cancel()
            timerFired(key: key, deadline: timer.deadline, shard: shard)
        }
        // The key's state before the event, put back if a later limit refuses a run.
        let before = limits.isEmpty ? nil : table.value.state(of: key)
        let keyed: KeyedDecision
        do {
            keyed = try table.value.event(token, key: key, hash: keyHash ?? KeySlotPrefetcher.hash(key), now: now)
        } catch {
            return .decided(.busy)
        }
        for evicted in keyed.evictedPending {
            // Another key's held request lost its state to make room: it will never run.
            _ = cancelExecution(evicted, reason: .evicted, shard: shard)
        }
        switch keyed.decision {
        case .run:
            var pass = LimitPass.none
            if let refused = passLimits(request.input, now: now, into: &pass) {
                table.value.restore(key: key, to: before)
                return .decided(refused)
            }
            if cancelInFlight { cancelRunning(key: key, effectID: request.effectID, shard: shard) }
            return runSingle(request, token: token, limits: pass, shard: shard)
        case .drop(let retryAfter):
            return .decided(.throttled(retryAfter: retryAfter))
        case .hold(let schedule, let superseded):
            if let superseded { answerHeld(superseded, with: .superseded, shard: shard) }
            // A refused hold leaves the table naming this token as its pending event: its timer
            // is armed all the same, and when it fires there is no execution to run, the window
            // closes, and nothing else happens.
            var pass = LimitPass.none
            if let refused = passLimits(request.input, now: now, into: &pass) {
                if let schedule { armTimer(key: key, at: schedule, shard: shard) }
                return .decided(refused)
            }
            if cancelInFlight { cancelRunning(key: key, effectID: request.effectID, shard: shard) }
            if let refused = admit(request, token: token, kind: .single, record: "", limits: pass, shard: shard) {
                if let schedule { armTimer(key: key, at: schedule, shard: shard) }
                return .decided(refused)
            }
            waiters.update(token) { $0.completion = later() }
            if let schedule { armTimer(key: key, at: schedule, shard: shard) }
            return .waiting(token)
        }
    }

    @inlinable
    func submitIdempotent(
        _ request: GateRequest<Plugin>, token: EventToken,
        records: StageState<IdempotencyTable<String, String, Result<Output, any Error>>>,
        quota: StageState<RateLimitTable<String>>?, later: () -> Completion, shard: GateShard
    ) -> Decision {
        let identity = handle.plugin.identity(for: request.input)
        let decision: IdempotencyDecision<Result<Output, any Error>>
        do {
            // The owner runs in this process, which completes or releases its record: no lease
            // runs out under a live owner, however long it works.
            decision = try records.value.begin(
                key: identity.record, fingerprint: identity.fingerprint, token: token, now: shard.now,
                lease: .untilReleased, concurrent: identity.concurrent)
        } catch {
            return .decided(.busy)
        }
        switch decision {
        case .execute:
            if let quota {
                // A quota table that cannot hold the key refuses too.
                let decision = try? quota.value.check(key: request.key, now: shard.now)
                guard decision?.allowed == true else {
                    records.value.cancel(key: identity.record, owner: token)
                    return .decided(.busy)
                }
            }
            // Only a new record reaches the limits: a replay, a join, a mismatch or a conflict
            // spends nothing.
            var pass = LimitPass.none
            var refused = passLimits(request.input, now: shard.now, into: &pass)
            if case .none = refused {
                refused = admit(request, token: token, kind: .idempotent, record: identity.record, limits: pass, shard: shard)
            }
            if let refused {
                records.value.cancel(key: identity.record, owner: token)
                quota?.value.refund(key: request.key, quantity: 1, now: shard.now)
                return .decided(refused)
            }
            return started(token, shard: shard)
        case .join(let owner):
            return join(request, token: token, owner: owner, kind: .idempotent, later: later, shard: shard)
        case .conflict:
            return .decided(.conflict)
        case .replay(.success(let output)):
            return .decided(.ran(output, .replayed))
        case .replay(.failure(let error)):
            return .decided(.failed(error, .replayed))
        case .mismatch:
            return .decided(.mismatch)
        }
    }

    @inlinable
    func submitSingleFlight(
        _ request: GateRequest<Plugin>, token: EventToken, later: () -> Completion, shard: GateShard
    ) -> Decision {
        let record = handle.plugin.identity(for: request.input).record
        switch flights.begin(token, key: record) {
        case .lead:
            var pass = LimitPass.none
            var refused = passLimits(request.input, now: shard.now, into: &pass)
            if case .none = refused {
                refused = admit(request, token: token, kind: .singleFlight, record: record, limits: pass, shard: shard)
            }
            if let refused {
                flights.forget(key: record)
                return .decided(refused)
            }
            return started(token, shard: shard)
        case .join(let leader):
            return join(request, token: token, owner: leader, kind: .singleFlight, later: later, shard: shard)
        }
    }

    /// Runs a single execution for `request` now.
    @inlinable
    func runSingle(_ request: GateRequest<Plugin>, token: EventToken, limits pass: LimitPass, shard: GateShard) -> Decision {
        if let outcome = runInPlace(request, rateLimit: nil, limits: pass, shard: shard) { return .decided(outcome) }
        if let refused = admit(request, token: token, kind: .single, record: "", limits: pass, shard: shard) {
            return .decided(refused)
        }
        return started(token, shard: shard)
    }

    /// Runs an effect that never suspends in place (``GatePlugin/runImmediately(_:context:)``):
    /// no task, no execution, no scope entry, nothing charged, since nothing is held. Returns
    /// `nil` when the plugin's effect runs as a task.
    @inlinable
    func runInPlace(
        _ request: GateRequest<Plugin>, rateLimit decision: RateLimitDecision?, limits pass: LimitPass, shard: GateShard
    ) -> GateOutcome<Output>? {
        // Read as whole nanoseconds: no `Duration` arithmetic on a path taken for every tap; not
        // read at all when no metrics backend keeps the duration.
        let timer = metrics.effectDuration
        let start = timer == nil ? 0 : SluiceLoop.monotonicNow().nanoseconds
        let result: Result<Output, any Error>
        do {
            // The context is a temporary of the call: the references it copies (key, effect ID,
            // shard) are not held across the clock reads around it, so an effect that does not
            // keep it costs no retain and release of them.
            guard
                let output = try handle.plugin.runImmediately(
                    request.input,
                    context: EffectContext(key: request.key, effectID: request.effectID, shard: shard, lane: index, execution: nil))
            else { return nil }
            result = .success(output)
        } catch {
            result = .failure(error)
        }
        timer?.recordNanoseconds(SluiceLoop.monotonicNow().nanoseconds &- start)
        // It has ended: its concurrency slots are free again.
        endLimits(pass)
        return outcome(result, reason: nil, source: .executed, rateLimit: decision, limits: pass.reports)
    }

    /// Adds a held execution for `request` (token `token`) with its leading waiter, charged to
    /// the budget and registered in the scopes, holding what `pass` took from the limits.
    /// Returns the outcome of a refusal (having given back what `pass` took), or `nil`.
    @inlinable
    func admit(
        _ request: GateRequest<Plugin>, token: EventToken, kind: Kind, record: String, limits pass: LimitPass,
        shard: GateShard
    ) -> GateOutcome<Output>? {
        let now = shard.now
        guard charge(Self.executionBytes, now: now) else {
            giveBack(pass, now: now)
            return .busy
        }
        guard charge(Self.waiterBytes, now: now) else {
            release(Self.executionBytes)
            giveBack(pass, now: now)
            return .busy
        }
        let shared = kind != .single
        // A single execution and its waiter share one token and one entry (in the caller's
        // scope); a shared execution has its own entry in the key's scope under the root.
        let waiter = shared ? shard.makeToken() : token
        guard shard.registerEntry(waiter, id: request.effectID, key: request.key, scope: request.scope,
                                  tag: Self.tag(lane: index, isExecution: false))
        else {
            release(Self.executionBytes)
            release(Self.waiterBytes)
            giveBack(pass, now: now)
            return .cancelled(.scopeClosed)
        }
        if shared {
            _ = shard.registerEntry(token, id: request.effectID, key: request.key, scope: nil,
                                    tag: Self.tag(lane: index, isExecution: true))
        }
        var execution = Execution(
            key: request.key, input: request.input, effectID: request.effectID, kind: kind, record: record,
            state: .held, leader: waiter)
        execution.limits = pass.keptByExecution
        executions.set(execution, for: token)
        waiters.set(Waiter(execution: token, completion: nil, source: .executed), for: waiter)
        return nil
    }

    /// Adds `request` as a waiter of the shared execution `owner`, of `kind` (idempotent or
    /// single-flight).
    @inlinable
    func join(
        _ request: GateRequest<Plugin>, token: EventToken, owner: EventToken, kind: Kind, later: () -> Completion,
        shard: GateShard
    ) -> Decision {
        guard executions.contains(owner) else {
            // Cannot happen: a record in flight or a flight always has its execution here.
            // Refuse rather than guess.
            if kind == .singleFlight { _ = flights.leave(token, key: handle.plugin.identity(for: request.input).record) }
            return .decided(.conflict)
        }
        guard charge(Self.waiterBytes, now: shard.now) else {
            if kind == .singleFlight { _ = flights.leave(token, key: handle.plugin.identity(for: request.input).record) }
            return .decided(.busy)
        }
        guard shard.registerEntry(token, id: request.effectID, key: request.key, scope: request.scope,
                                  tag: Self.tag(lane: index, isExecution: false))
        else {
            release(Self.waiterBytes)
            if kind == .singleFlight { _ = flights.leave(token, key: handle.plugin.identity(for: request.input).record) }
            return .decided(.cancelled(.scopeClosed))
        }
        waiters.set(Waiter(execution: owner, completion: later(), source: .joined), for: token)
        if kind == .idempotent { executions.update(owner) { $0.joiners.append(token) } }
        return .waiting(token)
    }
}
