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
        guard let binding = shared, let held = binding.held[token], case .failure(let error) = result else { return false }
        if let refusal = error as? CommitRefusal { return reason == nil && refusal.mayHaveAnotherOwner }
        return reason == .evicted && held.isLost
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
        let awaiting = SharedRecordClaim.awaiting(until: shard.now + options.lease)
        // The callers' own scope entries stay registered while they wait; a caller that wins
        // the record runs it under the root scope, as the key's executions live.
        let request = GateRequest(
            plugin: handle, input: execution.input, key: execution.key, effectID: execution.effectID,
            scope: GateScope(id: 0, parent: nil), shardIndex: shard.index)
        for waiter in [execution.leader] + execution.joiners {
            guard let entry = waiters[waiter] else { continue }
            guard let completion = entry.completion else {
                answer(waiter, with: .unavailable, shard: shard)
                continue
            }
            waiters.set(Waiter(execution: Self.pendingDecision, completion: completion, source: .executed), for: waiter)
            claim(request, token: waiter, identity: identity, as: awaiting, shard: shard, binding: binding)
        }
    }

    /// Polls the store again at `at` for a record another instance runs (``SharedRecordClaim``
    /// says when), while the request still waits.
    func schedulePoll(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, as next: SharedRecordClaim, at: Instant,
        shard: GateShard
    ) {
        guard let binding = shared else { return }
        let index = self.index
        binding.polls[token] = shard.clock.schedule(at: at) { [shard] in
            shard.withLane(index, as: Plugin.self) { lane in
                guard let binding = lane.shared else { return }
                binding.polls[token] = nil
                // It left meanwhile (its waiter is gone): stop polling.
                guard lane.waiters.contains(token) else { return }
                lane.claim(request, token: token, identity: identity, as: next, shard: shard, binding: binding)
            }
        }
    }

    // MARK: - Leases

    /// Sends the next renewal of execution `token`'s lease at `at` (``SharedRecordLease`` says
    /// when), while it runs and until its result is written.
    func scheduleRenewal(_ token: EventToken, at: Instant, key: StoreKey, fingerprint: String, shard: GateShard) {
        guard let binding = shared else { return }
        let index = self.index
        binding.heartbeats[token] = shard.clock.schedule(at: at) { [shard] in
            shard.withLane(index, as: Plugin.self) { lane in lane.renew(token, key: key, fingerprint: fingerprint, shard: shard) }
        }
    }

    /// Renews the lease of execution `token` (its heartbeat came).
    func renew(_ token: EventToken, key: StoreKey, fingerprint: String, shard: GateShard) {
        guard let binding = shared, let held = binding.held[token], !held.isLost else { return }
        let index = self.index
        let sentAt = shard.now
        let lease = held.lease
        binding.store.renew(key, lease: lease, fingerprint: fingerprint, duration: held.length, on: shard.loop) {
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
        guard let binding = shared, var held = binding.held[token] else { return }
        let answer: SharedRecordLease.RenewalAnswer =
            switch result {
            case .success(true): .renewed
            case .success(false): .takenByAnotherOwner
            case .failure: .noAnswer
            }
        let step = held.answered(answer, renewing: lease, sentAt: sentAt, now: shard.now)
        binding.held[token] = held
        switch step {
        case .renew(let at):
            scheduleRenewal(token, at: at, key: key, fingerprint: fingerprint, shard: shard)
        case .cancelEffect:
            binding.staleOwners.increment()
            binding.heartbeats[token] = nil
            binding.logger.error("lease lost while the effect ran; cancelling it", metadata: ["record": "\(key)"])
            _ = cancelExecution(token, reason: .evicted, shard: shard)
        case .ignore:
            break
        }
    }

    /// An execution holding a shared lease ended: write its result (or give the record back).
    /// Returns `false` when the execution held no shared lease (it ran under the local table).
    @usableFromInline
    func finishShared(_ token: EventToken, result: Result<Output, any Error>, execution: Execution, shard: GateShard) -> Bool {
        guard let binding = shared, let lease = binding.held[token]?.lease, let options = binding.idempotency else {
            return false
        }
        var fingerprint = ""
        if let flight = binding.flights[execution.record], flight.token == token {
            fingerprint = flight.fingerprint
            binding.flights[execution.record] = nil
        }
        let key = storeKey(execution.record)
        let failed: Bool
        var failureOutput = false
        var committedNothing = false
        switch result {
        case .success(let output):
            failed = false
            failureOutput = handle.plugin.isFailure(output)
        case .failure(let error):
            failed = true
            committedNothing = Self.committedNothing(error)
        }
        let ending = SharedRecordEnding.of(
            failed: failed, failureOutput: failureOutput, cancelled: execution.isCancelling, committedNothing: committedNothing,
            cacheErrors: options.cacheErrors)
        if case .release(let refundsQuota) = ending {
            forgetLease(token)
            releaseRecord(key, lease: lease, attempt: 0, shard: shard)
            // A released record holds nothing: the key's quota gets its unit back, unless the
            // effect was cancelled or changed nothing.
            if refundsQuota { recordQuota?.value.refund(key: execution.key, quantity: 1, now: shard.now) }
            return true
        }
        // A result that ran is never given back: one that cannot be encoded is stored as a
        // failure, replayed as such.
        let bytes = StoredResult.encode(result)
            ?? StoredResult.encode(Result<Output, any Error>.failure(StoredEffectError(message: "the result could not be stored")))
            ?? []
        // Duplicates here replay it while it is written; the heartbeat keeps the lease meanwhile.
        binding.unwritten[execution.record] = SharedLaneState.Unwritten(
            token: token, fingerprint: fingerprint, lease: lease, result: result, bytes: bytes)
        writeResult(execution.record, attempt: 0, shard: shard)
        return true
    }

    /// Stops renewing `token`'s lease and forgets it.
    func forgetLease(_ token: EventToken) {
        guard let binding = shared else { return }
        binding.held[token] = nil
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
                guard case .failure = result, attempt + 1 < SharedRecordEnding.releaseAttempts else {
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

    /// Why execution `token`, which holds a shared lease, may not commit now, as its lease's state
    /// machine says. `nil` when it may (or holds no shared lease). The time is read afresh: the
    /// loop's time cached for this iteration may predate a stall of the effect's thread, during
    /// which the lease ran out.
    func sharedLeaseRefusal(_ token: EventToken, shard: GateShard) -> CommitRefusal? {
        guard let binding = shared, let held = binding.held[token] else { return nil }
        return held.commitRefusal(
            now: shard.freshNow, storeReachable: binding.store.isReachable(from: shard.loop), storeAddress: binding.store.address,
            execution: token)
    }

    func retry(after attempt: Int, shard: GateShard, _ body: @escaping @Sendable (PluginLane<Plugin>) -> Void) {
        let at = shard.now + SharedRecordEnding.retryDelay(after: attempt)
        let index = self.index
        _ = shard.clock.schedule(at: at) { [shard] in
            shard.withLane(index, as: Plugin.self) { lane in body(lane) }
        }
    }

    /// Whether execution `token` holds a shared lease: at a drain it is answered but kept, so that
    /// a late end still writes its result or gives its record back.
    @usableFromInline
    func holdsSharedLease(_ token: EventToken) -> Bool {
        shared?.held[token] != nil
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
