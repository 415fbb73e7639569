import CoreMetrics
import Logging
import SluiceCore
import SluiceLibevent

/// A shared record's life after its claim: callers waiting for another owner's result, the
/// lease's heartbeat and commit guard, the result's write and the record's release.
extension PluginLane {
    /// Whether the callers of execution `token`, which ended with `result`, must wait for the
    /// record's result rather than hear how it ended: it held a shared lease and ended without
    /// committing because another owner may hold the record now (its guard found the lease
    /// unsafe or lost, its downstream refused its fence as stale, or it was cancelled when the
    /// store said its lease was lost).
    @usableFromInline
    func awaitsRecord(_ token: EventToken, result: Result<Output, any Error>, reason: CancellationReason?) -> Bool {
        guard let binding = shared, binding.leases[token] != nil, case .failure(let error) = result else { return false }
        if let refusal = error as? CommitRefusal { return reason == nil && refusal.mayHaveAnotherOwner }
        return reason == .evicted && binding.lost.contains(token)
    }

    /// The callers of `execution` wait for its record as duplicates in join mode do: each is a
    /// pending request again (in its own scope entry) that asks the store for the record, and
    /// is answered with its result once stored, `conflict` if it still runs a lease from now,
    /// or runs it if the record turns out free (nothing was committed). A caller whose
    /// completion is not known yet (the effect ended before `submit` returned) is answered
    /// `unavailable`.
    @usableFromInline
    func awaitRecord(of execution: Execution, shard: GateShard) {
        guard let binding = shared, let options = binding.idempotency else { return }
        var identity = handle.plugin.identity(for: execution.input)
        identity.concurrent = .join
        let deadline = shard.now + options.lease
        // The callers' own scope entries stay registered while they wait; a caller that wins
        // the record runs it under the root scope, as the key's executions live.
        let request = GateRequest(
            plugin: handle, input: execution.input, key: execution.key, effectID: execution.effectID,
            scope: GateScope(id: 0, parent: nil), loop: shard.loop, shardIndex: shard.index)
        for waiter in [execution.leader] + execution.joiners {
            guard let entry = waiters[waiter] else { continue }
            guard let completion = entry.completion else {
                answer(waiter, with: .unavailable, shard: shard)
                continue
            }
            waiters.set(Waiter(execution: Self.pendingDecision, completion: completion, source: .executed), for: waiter)
            claim(request, token: waiter, identity: identity, attempt: 1, deadline: deadline, shard: shard, binding: binding)
        }
    }

    /// Polls the store again for a record another instance runs, after a backoff with jitter
    /// (20 ms doubling to 500 ms, ±50 %), while the request still waits.
    func schedulePoll(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, attempt: Int, deadline: Instant,
        shard: GateShard
    ) {
        guard let binding = shared else { return }
        let base = min(500, 20 << min(attempt - 1, 5))
        let delay = Duration.milliseconds(Int.random(in: base / 2...base + base / 2))
        let index = self.index
        binding.polls[token] = shard.clock.schedule(at: shard.now + delay) { [shard] in
            shard.withLane(index, as: Plugin.self) { lane in
                guard let binding = lane.shared else { return }
                binding.polls[token] = nil
                // It left meanwhile (its waiter is gone): stop polling.
                guard lane.waiters.contains(token) else { return }
                lane.claim(
                    request, token: token, identity: identity, attempt: attempt, deadline: deadline, shard: shard,
                    binding: binding)
            }
        }
    }

    // MARK: - Leases

    /// Renews the lease every third of its length while its execution runs and until its result
    /// is written; a failed renewal is tried again sooner (every twelfth), so that a passing
    /// failure does not let the lease run out.
    func scheduleHeartbeat(
        _ token: EventToken, key: StoreKey, lease: StoreLease, fingerprint: String, shard: GateShard, retrying: Bool = false
    ) {
        guard let binding = shared, let options = binding.idempotency else { return }
        let period = retrying ? max(.milliseconds(20), options.lease / 12) : options.lease / 3
        let index = self.index
        binding.heartbeats[token] = shard.clock.schedule(at: shard.now + period) { [shard] in
            shard.withLane(index, as: Plugin.self) { lane in lane.renew(token, key: key, lease: lease, fingerprint: fingerprint, shard: shard) }
        }
    }

    /// Renews the lease of execution `token` (its heartbeat came).
    func renew(_ token: EventToken, key: StoreKey, lease: StoreLease, fingerprint: String, shard: GateShard) {
        guard let binding = shared, let options = binding.idempotency, binding.leases[token] == lease else { return }
        let index = self.index
        let sentAt = shard.now
        binding.store.renew(key, lease: lease, fingerprint: fingerprint, duration: options.lease, on: shard.loop) {
            [shard] result in
            shard.withLane(index, as: Plugin.self) { lane in
                lane.renewed(token, key: key, lease: lease, fingerprint: fingerprint, sentAt: sentAt, result: result, shard: shard)
            }
        }
    }

    /// The store answered a renewal of execution `token`'s lease.
    func renewed(
        _ token: EventToken, key: StoreKey, lease: StoreLease, fingerprint: String, sentAt: Instant,
        result: Result<Bool, StoreError>, shard: GateShard
    ) {
        let lane = self
        guard let binding = shared, let options = binding.idempotency, binding.leases[token] == lease else { return }
        switch result {
        case .success(true):
            binding.leaseDeadlines[token] = max(binding.leaseDeadlines[token] ?? sentAt, sentAt + options.lease)
            binding.renewalFailing.remove(token)
            lane.scheduleHeartbeat(token, key: key, lease: lease, fingerprint: fingerprint, shard: shard)
        case .success(false):
            // Another owner holds the record: stop the effect if it has not committed. The
            // lease stays, so that a result is still offered to the store, whose fence
            // decides.
            binding.staleOwners.increment()
            binding.lost.insert(token)
            binding.heartbeats[token] = nil
            binding.logger.error("lease lost while the effect ran; cancelling it", metadata: ["record": "\(key)"])
            _ = lane.cancelExecution(token, reason: .evicted, shard: shard)
        case .failure:
            binding.renewalFailing.insert(token)
            lane.scheduleHeartbeat(token, key: key, lease: lease, fingerprint: fingerprint, shard: shard, retrying: true)
        }
    }

    /// An execution holding a shared lease ended: write its result (or give the record back).
    /// Returns `false` when the execution held no shared lease (it ran under the local table).
    @usableFromInline
    func finishShared(_ token: EventToken, result: Result<Output, any Error>, execution: Execution, shard: GateShard) -> Bool {
        guard let binding = shared, let lease = binding.leases[token], let options = binding.idempotency else {
            return false
        }
        var fingerprint = ""
        if let flight = binding.flights[execution.record], flight.token == token {
            fingerprint = flight.fingerprint
            binding.flights[execution.record] = nil
        }
        let key = storeKey(execution.record)
        let bytes: [UInt8]
        switch result {
        case .success(let output):
            if handle.plugin.isFailure(output) && !options.cacheErrors {
                forgetLease(token)
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                // A released record holds nothing: its unit of the key's quota comes back.
                recordQuota?.refund(key: execution.key, quantity: 1, now: shard.now)
                return true
            }
            // A result that ran is never given back: one that cannot be encoded is stored as a
            // failure, replayed as such.
            bytes = StoredResult.encode(result)
                ?? StoredResult.encode(Result<Output, any Error>.failure(StoredEffectError(message: "the result could not be stored")))
                ?? []
        case .failure(let error):
            if execution.isCancelling || Self.committedNothing(error) || !options.cacheErrors {
                // Cancelled before committing (or an error the options do not keep): give the
                // record back so that a retry runs.
                forgetLease(token)
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                if !(execution.isCancelling || Self.committedNothing(error)) {
                    recordQuota?.refund(key: execution.key, quantity: 1, now: shard.now)
                }
                return true
            }
            bytes = StoredResult.encode(result) ?? []
        }
        // Duplicates here replay it while it is written; the heartbeat keeps the lease meanwhile.
        binding.unwritten[execution.record] = SharedLaneState.Unwritten(
            token: token, fingerprint: fingerprint, lease: lease, result: result, bytes: bytes)
        writeResult(execution.record, attempt: 0, shard: shard)
        return true
    }

    /// Stops renewing `token`'s lease and forgets it.
    func forgetLease(_ token: EventToken) {
        guard let binding = shared else { return }
        binding.leases[token] = nil
        binding.leaseDeadlines[token] = nil
        binding.lost.remove(token)
        binding.renewalFailing.remove(token)
        binding.heartbeats.removeValue(forKey: token)?.cancel()
    }

    /// Writes an unwritten result, retrying with backoff (50 ms doubling to 2 s) until the store
    /// takes or refuses it.
    func writeResult(_ record: String, attempt: Int, shard: GateShard) {
        guard let binding = shared, let options = binding.idempotency, let unwritten = binding.unwritten[record] else {
            return
        }
        let key = storeKey(record)
        let index = self.index
        let lease = unwritten.lease
        binding.store.complete(
            key, lease: lease, fingerprint: unwritten.fingerprint, result: unwritten.bytes, retention: options.retention,
            on: shard.loop
        ) { [shard] result in
            shard.withLane(index, as: Plugin.self) { lane in lane.written(record, lease: lease, key: key, attempt: attempt, result: result, shard: shard) }
        }
    }

    /// The store answered the write of `record`'s result.
    func written(
        _ record: String, lease: StoreLease, key: StoreKey, attempt: Int, result: Result<Bool, StoreError>, shard: GateShard
    ) {
        let lane = self
        guard let binding = shared, let unwritten = binding.unwritten[record], unwritten.lease == lease else { return }
        switch result {
        case .success(true):
            binding.unwritten[record] = nil
            lane.forgetLease(unwritten.token)
        case .success(false):
            binding.unwritten[record] = nil
            lane.forgetLease(unwritten.token)
            binding.staleOwners.increment()
            binding.logger.error(
                "the store refused a completion: its lease is no longer current", metadata: ["record": "\(key)"])
        case .failure:
            lane.retry(after: attempt, shard: shard) { lane in lane.writeResult(record, attempt: attempt + 1, shard: shard) }
        }
    }

    /// Gives a record back (an execution that did not commit), retrying a few times while the
    /// store fails; after that the lease runs out by itself.
    func releaseRecord(_ key: StoreKey, lease: StoreLease, attempt: Int, shard: GateShard) {
        guard let binding = shared else { return }
        let index = self.index
        if attempt == 0 { binding.pendingReleases += 1 }
        binding.store.release(key, lease: lease, on: shard.loop) { [shard] result in
            shard.withLane(index, as: Plugin.self) { lane in
                guard let binding = lane.shared else { return }
                guard case .failure = result, attempt < 5 else {
                    binding.pendingReleases -= 1
                    return
                }
                lane.retry(after: attempt, shard: shard) { lane in lane.releaseRecord(key, lease: lease, attempt: attempt + 1, shard: shard) }
            }
        }
    }

    /// Results and record releases on their way to the store.
    @usableFromInline
    var storeOperationsPending: Int {
        guard let binding = shared else { return 0 }
        return binding.unwritten.count + binding.pendingReleases
    }

    /// Why execution `token`, which holds a shared lease, may not commit now: the store said
    /// another owner took the record; or the lease cannot be renewed now (the store's connection
    /// is lost, or its last renewal got no answer), so it may run out before the effect's change
    /// lands and another instance take the record over; or less than a third of the lease is
    /// left by this process's clock. `nil` when it may (or holds no shared lease).
    func sharedLeaseRefusal(_ token: EventToken, shard: GateShard) -> CommitRefusal? {
        guard let binding = shared, binding.leases[token] != nil, let options = binding.idempotency else { return nil }
        if binding.lost.contains(token) {
            return CommitRefusal(code: .leaseLost, message: "another owner holds the record now", value: "\(token.rawValue)")
        }
        if !binding.store.isReachable(on: shard.loop) || binding.renewalFailing.contains(token) {
            return CommitRefusal(
                code: .leaseNotSafe, message: "the store cannot be reached, so the lease cannot be renewed",
                value: binding.store.address)
        }
        let deadline = binding.leaseDeadlines[token] ?? .zero
        let left = deadline - shard.now
        guard left > options.lease / 3 else {
            return CommitRefusal(
                code: .leaseNotSafe, message: "less than a third of the lease is left by this process's clock", value: "\(left)")
        }
        return nil
    }

    func retry(after attempt: Int, shard: GateShard, _ body: @escaping @Sendable (PluginLane<Plugin>) -> Void) {
        let delay = Duration.milliseconds(min(2_000, 50 << min(attempt, 6)))
        let at = shard.now + delay
        let index = self.index
        _ = shard.clock.schedule(at: at) { [shard] in
            shard.withLane(index, as: Plugin.self) { lane in body(lane) }
        }
    }

    /// Whether execution `token` holds a shared lease: at a drain it is answered but kept, so that
    /// a late end still writes its result or gives its record back.
    @usableFromInline
    func holdsSharedLease(_ token: EventToken) -> Bool {
        shared?.leases[token] != nil
    }

    /// Stops polling and answers the requests still waiting for the store (the gate drains).
    /// Leases stay renewed while their executions (kept by the drain) or their writes finish.
    @usableFromInline
    func drainShared(reason: CancellationReason, shard: GateShard) {
        guard let binding = shared else { return }
        for timer in binding.polls.values { timer.cancel() }
        binding.polls.removeAll()
        let pending = waiters.keys.filter { waiters[$0]?.execution == Self.pendingDecision }
        for token in pending { answer(token, with: .cancelled(reason), shard: shard) }
    }
}
