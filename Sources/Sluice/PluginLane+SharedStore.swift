import CoreMetrics
import Logging
import SluiceCore

/// Deciding with a shared store: the request waits (as a waiter in its caller's scope, with no
/// execution yet) for the store's one-round-trip decision, then runs, is refused, or falls back
/// as the plugin's `StoreFailureMode` says.
extension PluginLane {
    /// No execution: the waiter of a request whose decision is still at the store.
    static var pendingDecision: EventToken { EventToken(0) }

    @usableFromInline
    func submitShared(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard,
        binding: SharedLaneState<Output>
    ) -> GateOutcome<Output>? {
        let key = storeKey(request.key)
        let index = self.index
        switch binding.policy {
        case .throttle(let options):
            if let refused = addPending(request, token: token, later: later, shard: shard) { return refused }
            binding.store.throttle(key, interval: options.interval, on: shard.loop) { [shard] result in
                shard.lane(index, as: Plugin.self)?.throttleAnswered(request, token: token, result: result, shard: shard)
            }
            return nil
        case .rateLimit(let options):
            let cost = handle.plugin.cost(for: request.input)
            if let refused = addPending(request, token: token, later: later, shard: shard) { return refused }
            binding.store.rateLimit(key, options: options, cost: cost, on: shard.loop) { [shard] result in
                shard.lane(index, as: Plugin.self)?.rateLimitAnswered(request, token: token, result: result, shard: shard)
            }
            return nil
        case .idempotent(let options):
            return submitSharedIdempotent(request, token: token, later: later, shard: shard, binding: binding, options: options)
        default:
            return .busy
        }
    }

    // MARK: - Waiting for the store

    /// Registers `request` as a waiter with no execution yet. Returns the refusal, or `nil`.
    func addPending(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        guard charge(Self.waiterBytes, now: shard.clock.now) else { return .busy }
        guard shard.registerEntry(token, id: request.effectID, key: request.key, scope: request.scope,
                                  tag: Self.tag(lane: index, isExecution: false))
        else {
            release(Self.waiterBytes)
            return .cancelled(.scopeClosed)
        }
        waiters.set(Waiter(execution: Self.pendingDecision, completion: later(), source: .executed), for: token)
        return nil
    }

    /// Takes a pending request back to decide about it: its completion, or `nil` when it left
    /// (its scope closed, it was cancelled) while the store decided.
    func takePending(_ token: EventToken, shard: GateShard) -> Completion? {
        guard let waiter = waiters.remove(token) else { return nil }
        release(Self.waiterBytes)
        shard.finishEntry(token)
        return waiter.completion
    }

    func deliver(_ completion: Completion, _ outcome: GateOutcome<Output>) {
        metrics.count(outcome)
        completion(outcome)
    }

    /// Runs `request` now as a single execution, answering `completion`.
    func runDecided(
        _ request: GateRequest<Plugin>, token: EventToken, completion: @escaping Completion,
        rateLimit decision: RateLimitDecision?, shard: GateShard
    ) {
        if let outcome = runInPlace(request, rateLimit: decision, shard: shard) {
            deliver(completion, outcome)
            return
        }
        if let refused = admit(request, token: token, kind: .single, record: "", shard: shard) {
            deliver(completion, refused)
            return
        }
        if let decision { executions.update(token) { $0.rateLimit = decision } }
        if let outcome = launchAndWait(token, later: { completion }, shard: shard) { deliver(completion, outcome) }
    }

    // MARK: - Throttle and rate limit

    func throttleAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, result: Result<Duration?, StoreError>, shard: GateShard
    ) {
        switch result {
        case .success(nil):
            guard let completion = takePending(token, shard: shard) else { return }
            runDecided(request, token: token, completion: completion, rateLimit: nil, shard: shard)
        case .success(.some(let retryAfter)):
            guard let completion = takePending(token, shard: shard) else { return }
            deliver(completion, .throttled(retryAfter: retryAfter))
        case .failure:
            limitFailedOver(request, token: token, shard: shard)
        }
    }

    func rateLimitAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, result: Result<RateLimitDecision, StoreError>,
        shard: GateShard
    ) {
        switch result {
        case .success(let decision):
            guard let completion = takePending(token, shard: shard) else { return }
            guard decision.allowed else {
                deliver(completion, .limited(decision))
                return
            }
            runDecided(request, token: token, completion: completion, rateLimit: decision, shard: shard)
        case .failure:
            limitFailedOver(request, token: token, shard: shard)
        }
    }

    /// A throttle or rate limit whose store failed: open runs it, closed refuses it, local
    /// decides with this process's table (the divided limits).
    func limitFailedOver(_ request: GateRequest<Plugin>, token: EventToken, shard: GateShard) {
        guard let binding = shared, let completion = takePending(token, shard: shard) else { return }
        binding.countFallback()
        switch binding.failureMode {
        case .closed:
            deliver(completion, .unavailable)
        case .open:
            runDecided(request, token: token, completion: completion, rateLimit: nil, shard: shard)
        case .local:
            let local: Completion = { completion($0.decidedLocally) }
            let outcome =
                mode == .rateLimit
                ? submitRateLimit(request, token: token, later: { local }, shard: shard)
                : submitTimed(request, token: token, later: { local }, shard: shard)
            if let outcome { deliver(local, outcome) }
        }
    }

    // MARK: - Idempotency

    func submitSharedIdempotent(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard,
        binding: SharedLaneState<Output>, options: IdempotencyOptions
    ) -> GateOutcome<Output>? {
        // Every answer says whether the store lost its data lately, whenever it comes.
        let index = self.index
        let marking: @Sendable () -> Completion = {
            let completion = later()
            return { [shard] outcome in
                completion(shard.lane(index, as: Plugin.self)?.shared?.marked(outcome, now: shard.clock.now) ?? outcome)
            }
        }
        let outcome = submitSharedIdempotent(
            request, token: token, later: marking, shard: shard, binding: binding, options: options,
            identity: handle.plugin.identity(for: request.input))
        return outcome.map { binding.marked($0, now: shard.clock.now) }
    }

    func submitSharedIdempotent(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard,
        binding: SharedLaneState<Output>, options: IdempotencyOptions, identity: RequestIdentity
    ) -> GateOutcome<Output>? {
        // What this process holds comes first: its own running execution, a result not written
        // yet, or a record it ran alone while the store was down.
        if let held = heldOutcome(
            request, token: token, identity: identity, later: later, shard: shard, binding: binding, options: options)
        {
            return held
        }
        if hasLocalRecord(identity.record, shard: shard) {
            // Decided here while the store was down: only this process knows it, so it answers
            // from its own table (and says so), rather than letting the store run it again.
            let outcome = submitIdempotent(request, token: token, later: {
                let completion = later()
                return { completion($0.decidedLocally) }
            }, shard: shard)
            return outcome?.decidedLocally
        }
        // Results this process could not write yet are bounded: past the cap, refuse new claims.
        guard binding.unwritten.count < SharedLaneState<Output>.maximumUnwritten else { return .unavailable }
        if recordQuota != nil {
            // Charged before the claim (a refused or duplicate request gives it back), so that a
            // flood of new records never reaches the store.
            let decision = try? recordQuota?.check(key: request.key, now: shard.clock.now)
            guard decision?.allowed == true else { return .busy }
        }
        if let refused = addPending(request, token: token, later: later, shard: shard) {
            recordQuota?.refund(key: request.key, quantity: 1, now: shard.clock.now)
            return refused
        }
        claim(request, token: token, identity: identity, attempt: 0, deadline: nil, shard: shard, binding: binding)
        return nil
    }

    /// Whether this process's own table holds a live record of `record` (a payment it ran alone,
    /// in `local` mode, while the store was down).
    func hasLocalRecord(_ record: String, shard: GateShard) -> Bool {
        guard let table = idempotency?.table, let index = table.index(of: record) else { return false }
        return !table[index].isIdle(at: shard.clock.now)
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

    /// Asks the store to claim the record for the pending request `token` (again, when
    /// `attempt` > 0: it polls while another instance runs it).
    func claim(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, attempt: Int, deadline: Instant?,
        shard: GateShard, binding: SharedLaneState<Output>
    ) {
        guard let options = binding.idempotency else { return }
        let index = self.index
        let key = storeKey(identity.record)
        let owner = owner(of: token, shard: shard, binding: binding)
        // A lease granted by this claim runs out at the latest a lease after the claim left.
        let sentAt = shard.clock.now
        binding.store.claim(
            key, fingerprint: identity.fingerprint, owner: owner, lease: options.lease, retention: options.retention,
            on: shard.loop
        ) {
            [shard] result in
            shard.lane(index, as: Plugin.self)?.claimAnswered(
                request, token: token, identity: identity, result: result, attempt: attempt, deadline: deadline,
                sentAt: sentAt, shard: shard)
        }
    }

    /// The answer to a request whose record this process holds (running here, or its result not
    /// written yet), from that rather than from the store: `nil` when it holds none; otherwise
    /// the outcome, or `.some(nil)` when the request joined the running execution.
    func heldOutcome(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, later: @Sendable () -> Completion,
        shard: GateShard, binding: SharedLaneState<Output>, options: IdempotencyOptions
    ) -> GateOutcome<Output>?? {
        if let flight = binding.flights[identity.record] {
            guard flight.fingerprint == identity.fingerprint else { return .mismatch }
            if (identity.concurrent ?? options.concurrent) == .reject { return .conflict }
            return .some(join(request, token: token, owner: flight.token, later: later, shard: shard))
        }
        if let unwritten = binding.unwritten[identity.record] {
            return unwritten.fingerprint == identity.fingerprint ? Self.replay(unwritten.result) : .mismatch
        }
        return nil
    }

    /// The store's key of `key` (a key or an idempotency record) for this plugin.
    func storeKey(_ key: String) -> StoreKey {
        StoreKey(plugin: handle.plugin.name, key: key)
    }

    func claimAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity,
        result: Result<StoreClaim, StoreError>, attempt: Int, deadline: Instant?, sentAt: Instant, shard: GateShard
    ) {
        guard let binding = shared, let options = binding.idempotency else { return }
        let key = storeKey(identity.record)
        let refundQuota = { [self] in recordQuota?.refund(key: request.key, quantity: 1, now: shard.clock.now) }
        if case .success(.claimed(let lease)) = result { binding.observe(epoch: lease.fence.epoch, now: shard.clock.now) }
        if binding.flights[identity.record] != nil || binding.unwritten[identity.record] != nil {
            // This process holds the record now (its own claim landed meanwhile): answer from it.
            if case .success(.claimed(let lease)) = result {
                if let flight = binding.flights[identity.record] {
                    // Its execution still runs, but its lease ran out (the store was unreachable
                    // longer than the lease) and this claim took it: the running execution adopts
                    // the new lease, and this request is its duplicate.
                    binding.heartbeats.removeValue(forKey: flight.token)?.cancel()
                    binding.leases[flight.token] = lease
                    binding.leaseDeadlines[flight.token] = sentAt + options.lease
                    binding.lost.remove(flight.token)
                    scheduleHeartbeat(flight.token, key: key, lease: lease, fingerprint: flight.fingerprint, shard: shard)
                } else {
                    // Cannot happen (a result waiting for its write keeps its record): give it back.
                    releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                }
            }
            guard let completion = takePending(token, shard: shard) else { return }
            refundQuota()
            let held = heldOutcome(
                request, token: token, identity: identity, later: { completion }, shard: shard, binding: binding,
                options: options)
            if let outcome = held ?? nil { deliver(completion, outcome) }
            return
        }
        switch result {
        case .success(.claimed(let lease)):
            guard let completion = takePending(token, shard: shard) else {
                // Its caller left before it ran: give the record back so that a retry runs.
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                refundQuota()
                return
            }
            if shard.isDraining {
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                refundQuota()
                deliver(completion, .shuttingDown)
                return
            }
            if let refused = admit(request, token: token, kind: .idempotent, record: identity.record, shard: shard) {
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                refundQuota()
                deliver(completion, refused)
                return
            }
            binding.flights[identity.record] = SharedLaneState.Flight(token: token, fingerprint: identity.fingerprint)
            binding.leases[token] = lease
            binding.leaseDeadlines[token] = sentAt + options.lease
            scheduleHeartbeat(token, key: key, lease: lease, fingerprint: identity.fingerprint, shard: shard)
            if let outcome = launchAndWait(token, later: { completion }, shard: shard) { deliver(completion, outcome) }
        case .success(.running):
            if (identity.concurrent ?? options.concurrent) == .reject {
                guard let completion = takePending(token, shard: shard) else { return }
                refundQuota()
                deliver(completion, .conflict)
                return
            }
            let now = shard.clock.now
            let until = deadline ?? now + options.lease
            guard now < until else {
                // Waited a whole lease and the other instance still runs it: refuse, not guess.
                guard let completion = takePending(token, shard: shard) else { return }
                refundQuota()
                deliver(completion, .conflict)
                return
            }
            schedulePoll(request, token: token, identity: identity, attempt: attempt + 1, deadline: until, shard: shard)
        case .success(.completed(let bytes)):
            guard let completion = takePending(token, shard: shard) else { return }
            refundQuota()
            if let stored = StoredResult.decode(bytes, as: Output.self) {
                deliver(completion, Self.replay(stored))
            } else {
                binding.logger.error("a stored result cannot be read", metadata: ["record": "\(key)"])
                deliver(completion, .unavailable)
            }
        case .success(.mismatch(let stored)):
            binding.logger.debug(
                "idempotency key reused with another payload",
                metadata: ["record": "\(key)", "stored-fingerprint": "\(stored)", "fingerprint": "\(identity.fingerprint)"])
            guard let completion = takePending(token, shard: shard) else { return }
            refundQuota()
            deliver(completion, .mismatch)
        case .failure:
            // The claim may have landed before the store failed: give it back, by owner.
            let owner = owner(of: token, shard: shard, binding: binding)
            releaseRecord(key, lease: StoreLease(owner: owner, fence: FencingToken(value: 0)), attempt: 0, shard: shard)
            guard let completion = takePending(token, shard: shard) else {
                refundQuota()
                return
            }
            refundQuota()
            binding.countFallback()
            // A payment never fails open, and never runs alone once the store has said that
            // another owner runs it (`deadline` is set after the first "running").
            guard binding.failureMode == .local, deadline == nil else {
                deliver(completion, .unavailable)
                return
            }
            let local: Completion = { completion($0.decidedLocally) }
            if let outcome = submitIdempotent(request, token: token, later: { local }, shard: shard) {
                deliver(local, outcome)
            }
        }
    }

    // MARK: - Waiting for another owner's result

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
        let deadline = shard.clock.now + options.lease
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
        binding.polls[token] = shard.clock.schedule(at: shard.clock.now + delay) { [shard] in
            guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared else { return }
            binding.polls[token] = nil
            // It left meanwhile (its waiter is gone): stop polling.
            guard lane.waiters.contains(token) else { return }
            lane.claim(
                request, token: token, identity: identity, attempt: attempt, deadline: deadline, shard: shard,
                binding: binding)
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
        binding.heartbeats[token] = shard.clock.schedule(at: shard.clock.now + period) { [shard] in
            guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared,
                binding.leases[token] == lease
            else { return }
            let sentAt = shard.clock.now
            binding.store.renew(key, lease: lease, fingerprint: fingerprint, duration: options.lease, on: shard.loop) {
                [shard] result in
                guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared,
                    binding.leases[token] == lease
                else { return }
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
                recordQuota?.refund(key: execution.key, quantity: 1, now: shard.clock.now)
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
                    recordQuota?.refund(key: execution.key, quantity: 1, now: shard.clock.now)
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
            guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared,
                let unwritten = binding.unwritten[record], unwritten.lease == lease
            else { return }
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
    }

    /// Gives a record back (an execution that did not commit), retrying a few times while the
    /// store fails; after that the lease runs out by itself.
    func releaseRecord(_ key: StoreKey, lease: StoreLease, attempt: Int, shard: GateShard) {
        guard let binding = shared else { return }
        let index = self.index
        if attempt == 0 { binding.pendingReleases += 1 }
        binding.store.release(key, lease: lease, on: shard.loop) { [shard] result in
            guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared else { return }
            guard case .failure = result, attempt < 5 else {
                binding.pendingReleases -= 1
                return
            }
            lane.retry(after: attempt, shard: shard) { lane in lane.releaseRecord(key, lease: lease, attempt: attempt + 1, shard: shard) }
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
        let left = deadline - shard.clock.now
        guard left > options.lease / 3 else {
            return CommitRefusal(
                code: .leaseNotSafe, message: "less than a third of the lease is left by this process's clock", value: "\(left)")
        }
        return nil
    }

    func retry(after attempt: Int, shard: GateShard, _ body: @escaping @Sendable (PluginLane<Plugin>) -> Void) {
        let delay = Duration.milliseconds(min(2_000, 50 << min(attempt, 6)))
        let at = shard.clock.now + delay
        let index = self.index
        _ = shard.clock.schedule(at: at) { [shard] in
            guard let lane = shard.lane(index, as: Plugin.self) else { return }
            body(lane)
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
