import CoreMetrics
import Logging
import SluiceCore
import SluiceLibevent

/// Idempotency with a shared store: what this process holds answers first; otherwise the store
/// claims the record (one round trip), and the request runs, replays, joins by polling, or is
/// refused.
extension PluginLane {
    func submitSharedIdempotent(
        _ request: GateRequest<Plugin>, token: EventToken, later: () -> Completion, shard: GateShard,
        binding: SharedLaneState<Output>, options: IdempotencyOptions
    ) -> Decision {
        // Every answer says whether the store lost its data lately, whenever it comes.
        let index = self.index
        func marking() -> Completion {
            let completion = later()
            return { [shard] outcome in
                completion(shard.withLane(index, as: Plugin.self) { $0.shared?.marked(outcome, now: shard.now) ?? outcome } ?? outcome)
            }
        }
        let identity = handle.plugin.identity(for: request.input)
        if let held = heldOutcome(
            request, token: token, identity: identity, later: marking, shard: shard, binding: binding, options: options)
        {
            guard case .decided(let outcome) = held else { return held }
            return .decided(binding.marked(outcome, now: shard.now))
        }
        if hasLocalRecord(identity.record, shard: shard) {
            // Decided here while the store was down: only this process knows it, so it answers
            // from its own table (and says so), rather than letting the store run it again. An
            // execution it starts is queued, so that its leader's completion says so too.
            let decision = submitIdempotentLocally(request, token: token, later: { Self.locally(marking()) }, shard: shard)
            let outcome = carryOut(decision, later: { Self.locally(marking()) }, shard: shard)
            guard let outcome else {
                // It waits as the leader of the execution it started, or under its own token.
                if case .start(let start) = decision { return .waiting(start.leader) }
                return .waiting(token)
            }
            return .decided(binding.marked(outcome.decidedLocally, now: shard.now))
        }
        let outcome = claimRecord(request, token: token, identity: identity, later: marking, shard: shard, binding: binding)
        guard let outcome else { return .waiting(token) }
        return .decided(binding.marked(outcome, now: shard.now))
    }

    /// Decides about `request` with this process's own records alone (its store is down, or
    /// the record was opened here while it was).
    func submitIdempotentLocally(
        _ request: GateRequest<Plugin>, token: EventToken, later: () -> Completion, shard: GateShard
    ) -> Decision {
        guard let records else { return .decided(.busy) }
        return submitIdempotent(request, token: token, records: records, quota: recordQuota, later: later, shard: shard)
    }

    /// `completion`, told that the outcome was decided by this process alone.
    static func locally(_ completion: @escaping Completion) -> Completion {
        { completion($0.decidedLocally) }
    }

    /// Sends the claim of `request`'s record to the store, the request pending until it answers.
    /// Returns a refusal, or `nil` once the claim is on its way.
    func claimRecord(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, later: () -> Completion,
        shard: GateShard, binding: SharedLaneState<Output>
    ) -> GateOutcome<Output>? {
        // Results this process could not write yet are bounded: past the cap, refuse new claims.
        guard binding.unwritten.count < SharedLaneState<Output>.maximumUnwritten else { return .unavailable }
        if let quota = recordQuota {
            // Charged before the claim (a refused or duplicate request gives it back), so that a
            // flood of new records never reaches the store.
            let decision = try? quota.value.check(key: request.key, now: shard.now)
            guard decision?.allowed == true else { return .busy }
        }
        if let refused = addPending(request, token: token, later: later, shard: shard) {
            recordQuota?.value.refund(key: request.key, quantity: 1, now: shard.now)
            return refused
        }
        claim(request, token: token, identity: identity, as: .first, shard: shard, binding: binding)
        return nil
    }

    /// Whether this process's own table holds a live record of `record` (a payment it ran alone,
    /// in `local` mode, while the store was down).
    func hasLocalRecord(_ record: String, shard: GateShard) -> Bool {
        guard let table = records?.value.table, let index = table.index(of: record) else { return false }
        return !table[index].isIdle(at: shard.now)
    }

    static func replay(_ result: Result<Output, any Error>) -> GateOutcome<Output> {
        switch result {
        case .success(let output): .ran(output, .replayed)
        case .failure(let error): .failed(error, .replayed)
        }
    }

    /// The owner name of execution `token`: unique across processes and executions.
    func owner(of token: EventToken, shard: GateShard, binding: SharedLaneState<Output>) -> String {
        "\(binding.instance)-\(shard.index)-\(token.rawValue)"
    }

    /// Asks the store to claim the record for the pending request `token` (again, when it polls
    /// while another instance runs it).
    func claim(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, as attempt: SharedRecordClaim,
        shard: GateShard, binding: SharedLaneState<Output>
    ) {
        guard let options = binding.idempotency else { return }
        let index = self.index
        let key = storeKey(identity.record)
        let owner = owner(of: token, shard: shard, binding: binding)
        // A lease granted by this claim runs out at the latest a lease after the claim left.
        let sentAt = shard.now
        binding.store.claim(
            key, fingerprint: identity.fingerprint, owner: owner, lease: options.lease, retention: options.retention,
            on: shard.loop
        ) {
            [shard] result in
            shard.withLane(index, as: Plugin.self) {
                $0.claimAnswered(
                    request, token: token, identity: identity, result: result, attempt: attempt, sentAt: sentAt, shard: shard)
            }
        }
    }

    /// The answer to a request whose record this process holds (running here, or its result not
    /// written yet), from that rather than from the store: `nil` when it holds none; otherwise
    /// the outcome, or the token it waits under when it joined the running execution.
    func heldOutcome(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, later: () -> Completion,
        shard: GateShard, binding: SharedLaneState<Output>, options: IdempotencyOptions
    ) -> Decision? {
        if let flight = binding.flights[identity.record] {
            guard flight.fingerprint == identity.fingerprint else { return .decided(.mismatch) }
            if (identity.concurrent ?? options.concurrent) == .reject { return .decided(.conflict) }
            return join(request, token: token, owner: flight.token, kind: .idempotent, later: later, shard: shard)
        }
        if let unwritten = binding.unwritten[identity.record] {
            return .decided(unwritten.fingerprint == identity.fingerprint ? Self.replay(unwritten.result) : .mismatch)
        }
        return nil
    }

    /// The store's key of `key` (a key or an idempotency record) for this plugin.
    func storeKey(_ key: String) -> StoreKey {
        StoreKey(plugin: handle.plugin.name, key: key)
    }

    func claimAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity,
        result: Result<StoreClaim, StoreError>, attempt: SharedRecordClaim, sentAt: Instant, shard: GateShard
    ) {
        guard let binding = shared, let options = binding.idempotency else { return }
        let key = storeKey(identity.record)
        // Whether a duplicate waits for another owner's execution, rather than being refused.
        let joins = (identity.concurrent ?? options.concurrent) != .reject
        let refundQuota = { [self] in recordQuota?.value.refund(key: request.key, quantity: 1, now: shard.now) }
        if case .success(.claimed(let lease)) = result { binding.observe(epoch: lease.fence.epoch, now: shard.now) }
        if binding.flights[identity.record] != nil || binding.unwritten[identity.record] != nil {
            // This process holds the record now (its own claim landed meanwhile): answer from it.
            if case .success(.claimed(let lease)) = result {
                // Its lease ran out (the store was unreachable longer than the lease, or this
                // claim took longer than a lease to land) and this claim took the record again.
                // What holds the record adopts the new lease: a running execution renews it and
                // commits under its fence; a result waiting for its write is written under it.
                // Giving it back would delete the record, the old lease's write would then be
                // refused, and a retry would run the effect again.
                adopt(lease, record: identity.record, key: key, claimSentAt: sentAt, shard: shard, binding: binding)
            }
            answerFromHeldRecord(request, token: token, identity: identity, joins: joins, shard: shard, binding: binding)
            return
        }
        let step = attempt.step(
            after: try? result.get(), joins: joins, lease: options.lease,
            failureMode: binding.failureMode, now: shard.now, using: &binding.jitter)
        switch step {
        case .run(let lease):
            guard isPending(token) else {
                // Its caller left before it ran: give the record back so that a retry runs.
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                refundQuota()
                return
            }
            if storeDecidesChain {
                // A claim answered too late to start (``runClaimed(_:token:identity:lease:sentAt:limits:shard:binding:)``)
                // spends nothing at the store's chain.
                guard SharedRecordLease(lease, length: options.lease, claimSentAt: sentAt).mayStart(now: shard.freshNow) else {
                    releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                    refundQuota()
                    answerPending(token, with: .unavailable, shard: shard)
                    return
                }
                admitClaimedChain(
                    request, token: token, identity: identity, lease: lease, sentAt: sentAt, shard: shard, binding: binding)
                return
            }
            if let refused = runClaimed(
                request, token: token, identity: identity, lease: lease, sentAt: sentAt, shard: shard, binding: binding)
            {
                // Nothing ran: the record goes back, so that nothing is stored for it.
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                refundQuota()
                answerPending(token, with: refused, shard: shard)
            }
        case .poll(let next, let at):
            schedulePoll(request, token: token, identity: identity, as: next, at: at, shard: shard)
        case .conflict:
            guard let completion = takePending(token, shard: shard) else { return }
            refundQuota()
            deliver(completion, .conflict, shard: shard)
        case .replay(let bytes):
            guard let completion = takePending(token, shard: shard) else { return }
            refundQuota()
            if let stored = StoredResult.decode(bytes, as: Output.self) {
                deliver(completion, Self.replay(stored), shard: shard)
            } else {
                binding.logger.error("a stored result cannot be read", metadata: ["record": "\(key)"])
                deliver(completion, .unavailable, shard: shard)
            }
        case .mismatch(let stored):
            binding.logger.debug(
                "idempotency key reused with another payload",
                metadata: ["record": "\(key)", "stored-fingerprint": "\(stored)", "fingerprint": "\(identity.fingerprint)"])
            guard let completion = takePending(token, shard: shard) else { return }
            refundQuota()
            deliver(completion, .mismatch, shard: shard)
        case .failed(let decideLocally):
            // The claim may have landed before the store failed: give it back, by owner.
            let owner = owner(of: token, shard: shard, binding: binding)
            releaseRecord(key, lease: StoreLease(owner: owner, fence: FencingToken(value: 0)), attempt: 0, shard: shard)
            refundQuota()
            guard let completion = takePending(token, shard: shard) else { return }
            binding.countFallback()
            guard decideLocally else {
                deliver(completion, .unavailable, shard: shard)
                return
            }
            let local = Self.locally(completion)
            let decision = submitIdempotentLocally(request, token: token, later: { local }, shard: shard)
            if let outcome = carryOut(decision, later: { local }, shard: shard) { deliver(local, outcome, shard: shard) }
        }
    }

    /// Answers the pending request `token` from what this process holds of its record (an
    /// execution running here, or a result not written yet), its record quota given back: a
    /// duplicate that joins waits for the execution as it is (its waiter, registered and charged
    /// when it began waiting for the store, joins it); otherwise it is answered from the held
    /// record (a replay, a mismatch, a conflict).
    func answerFromHeldRecord(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, joins: Bool, shard: GateShard,
        binding: SharedLaneState<Output>
    ) {
        guard let options = binding.idempotency else { return }
        recordQuota?.value.refund(key: request.key, quantity: 1, now: shard.now)
        if let flight = binding.flights[identity.record], flight.fingerprint == identity.fingerprint, joins,
            joinPending(token, owner: flight.token)
        {
            return
        }
        guard let completion = takePending(token, shard: shard) else { return }
        let held = heldOutcome(
            request, token: token, identity: identity, later: { completion }, shard: shard, binding: binding, options: options)
        if let held, let outcome = carryOut(held, later: { completion }, shard: shard) {
            deliver(completion, outcome, shard: shard)
        }
    }

    /// Makes the new `lease` of `record`, which a claim of this process was granted, the lease of
    /// what holds the record here: its running execution, or its result waiting for its write.
    func adopt(
        _ lease: StoreLease, record: String, key: StoreKey, claimSentAt: Instant, shard: GateShard,
        binding: SharedLaneState<Output>
    ) {
        guard let options = binding.idempotency else { return }
        let token: EventToken
        let fingerprint: String
        let awaitsWrite: Bool
        if let flight = binding.flights[record] {
            token = flight.token
            fingerprint = flight.fingerprint
            awaitsWrite = false
        } else if var unwritten = binding.unwritten[record] {
            token = unwritten.token
            fingerprint = unwritten.fingerprint
            awaitsWrite = true
            unwritten.lease = lease
            binding.unwritten[record] = unwritten
        } else {
            return
        }
        binding.heartbeats.removeValue(forKey: token)?.cancel()
        var held = binding.held[token] ?? SharedRecordLease(lease, length: options.lease, claimSentAt: claimSentAt)
        let next = held.adopt(lease, claimSentAt: claimSentAt, now: shard.now)
        binding.held[token] = held
        scheduleRenewal(token, at: next, key: key, fingerprint: fingerprint, shard: shard)
        // A result waiting for its write is sent again at once, under the new lease.
        if awaitsWrite { writeResult(record, attempt: 0, shard: shard) }
    }

    /// Runs the pending request `token`, whose claim the store granted under `lease`, as the
    /// leader of a new execution of its record. Its waiter, registered in its caller's scope and
    /// charged when it began waiting for the store, leads the execution as it is: nothing is
    /// registered, charged or released twice. The limits decide first (what the store replays or
    /// joins never gets here): in this process, or, when the store decided them, `decided` is
    /// what the request holds there. Returns the refusal, having changed nothing (and given back
    /// what `decided` holds), or `nil`.
    func runClaimed(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, lease: StoreLease, sentAt: Instant,
        limits decided: LimitPass? = nil, shard: GateShard, binding: SharedLaneState<Output>
    ) -> GateOutcome<Output>? {
        // Read afresh: the lease's time left decides whether the effect may start.
        let now = shard.freshNow
        guard let options = binding.idempotency else {
            if let decided { giveBack(decided, now: now) }
            return .busy
        }
        // A store's late answer starts nothing once the gate drains.
        guard !shard.isDraining else {
            if let decided { giveBack(decided, now: now) }
            return .shuttingDown
        }
        let held = SharedRecordLease(lease, length: options.lease, claimSentAt: sentAt)
        // A claim answered so late that the lease may run out before the first renewal starts
        // nothing: another instance could take the record over and run it too.
        guard held.mayStart(now: now) else {
            if let decided { giveBack(decided, now: now) }
            return .unavailable
        }
        var pass = decided ?? .none
        if decided == nil, let refused = passLimits(request.input, now: now, into: &pass) { return refused }
        guard
            let execution = leadPending(
                request, token: token, kind: .idempotent, record: identity.record, limits: pass, rateLimit: nil, shard: shard)
        else { return .busy }
        binding.flights[identity.record] = SharedLaneState.Flight(token: execution, fingerprint: identity.fingerprint)
        binding.held[execution] = held
        scheduleRenewal(
            execution, at: held.nextRenewal(after: now), key: storeKey(identity.record), fingerprint: identity.fingerprint,
            shard: shard)
        launch(execution, shard: shard)
        return nil
    }

    /// The pending request `token` joins execution `owner`, running here, as it waits: its
    /// waiter, registered and charged when it began waiting for the store, waits for `owner`
    /// now. `false` (nothing changed) when it no longer waits for the store, or `owner` is gone.
    func joinPending(_ token: EventToken, owner: EventToken) -> Bool {
        guard executions.contains(owner) else { return false }
        let joined = waiters.update(token) { waiter -> Bool in
            guard waiter.execution == Self.pendingDecision else { return false }
            waiter.execution = owner
            waiter.source = .joined
            return true
        }
        guard joined == true else { return false }
        executions.update(owner) { $0.joiners.append(token) }
        return true
    }
}
