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
        let key = StoreKey(plugin: handle.plugin.name, key: request.key)
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
        let identity = handle.plugin.identity(for: request.input)
        // What this process holds first: its own running execution, or a result not written yet.
        if let flight = binding.flights[identity.record] {
            guard flight.fingerprint == identity.fingerprint else { return .mismatch }
            if (identity.concurrent ?? options.concurrent) == .reject { return .conflict }
            return join(request, token: token, owner: flight.token, later: later, shard: shard)
        }
        if let unwritten = binding.unwritten[identity.record] {
            guard unwritten.fingerprint == identity.fingerprint else { return .mismatch }
            return Self.replay(unwritten.result)
        }
        if let refused = addPending(request, token: token, later: later, shard: shard) { return refused }
        claim(request, token: token, identity: identity, attempt: 0, deadline: nil, shard: shard, binding: binding)
        return nil
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
        let key = StoreKey(plugin: handle.plugin.name, key: identity.record)
        let owner = owner(of: token, shard: shard, binding: binding)
        binding.store.claim(key, fingerprint: identity.fingerprint, owner: owner, lease: options.lease, on: shard.loop) {
            [shard] result in
            shard.lane(index, as: Plugin.self)?.claimAnswered(
                request, token: token, identity: identity, result: result, attempt: attempt, deadline: deadline,
                shard: shard)
        }
    }

    func claimAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity,
        result: Result<StoreClaim, StoreError>, attempt: Int, deadline: Instant?, shard: GateShard
    ) {
        guard let binding = shared, let options = binding.idempotency else { return }
        let key = StoreKey(plugin: handle.plugin.name, key: identity.record)
        switch result {
        case .success(.claimed(let lease)):
            guard let completion = takePending(token, shard: shard) else {
                // Its caller left before it ran: give the record back so that a retry runs.
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                return
            }
            if binding.flights[identity.record] != nil || binding.unwritten[identity.record] != nil {
                // Cannot happen (the store gave this process the record twice): refuse rather
                // than run twice.
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                deliver(completion, .conflict)
                return
            }
            if recordQuota != nil {
                let decision = try? recordQuota?.check(key: request.key, now: shard.clock.now)
                guard decision?.allowed == true else {
                    releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                    deliver(completion, .busy)
                    return
                }
            }
            if let refused = admit(request, token: token, kind: .idempotent, record: identity.record, shard: shard) {
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                recordQuota?.refund(key: request.key, quantity: 1, now: shard.clock.now)
                deliver(completion, refused)
                return
            }
            binding.flights[identity.record] = SharedLaneState.Flight(token: token, fingerprint: identity.fingerprint)
            binding.leases[token] = lease
            scheduleHeartbeat(token, key: key, lease: lease, every: options.lease / 3, shard: shard)
            if let outcome = launchAndWait(token, later: { completion }, shard: shard) { deliver(completion, outcome) }
        case .success(.running):
            if (identity.concurrent ?? options.concurrent) == .reject {
                if let completion = takePending(token, shard: shard) { deliver(completion, .conflict) }
                return
            }
            let now = shard.clock.now
            let until = deadline ?? now + options.lease
            guard now < until else {
                // Waited a whole lease and the other instance still runs it: refuse, not guess.
                if let completion = takePending(token, shard: shard) { deliver(completion, .conflict) }
                return
            }
            schedulePoll(request, token: token, identity: identity, attempt: attempt + 1, deadline: until, shard: shard)
        case .success(.completed(let bytes)):
            guard let completion = takePending(token, shard: shard) else { return }
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
            if let completion = takePending(token, shard: shard) { deliver(completion, .mismatch) }
        case .failure:
            // The claim may have landed before the store failed: give it back, by owner.
            let owner = owner(of: token, shard: shard, binding: binding)
            releaseRecord(key, lease: StoreLease(owner: owner, fence: 0), attempt: 0, shard: shard)
            guard let completion = takePending(token, shard: shard) else { return }
            binding.countFallback()
            guard binding.failureMode == .local else {
                // A payment never fails open.
                deliver(completion, .unavailable)
                return
            }
            let local: Completion = { completion($0.decidedLocally) }
            if let outcome = submitIdempotent(request, token: token, later: { local }, shard: shard) {
                deliver(local, outcome)
            }
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
        let at = shard.clock.now + delay
        let index = self.index
        binding.polls[token] = shard.clock.schedule(at: at) { [shard] in
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

    func scheduleHeartbeat(_ token: EventToken, key: StoreKey, lease: StoreLease, every period: Duration, shard: GateShard) {
        guard let binding = shared, let options = binding.idempotency else { return }
        let at = shard.clock.now + period
        let index = self.index
        binding.heartbeats[token] = shard.clock.schedule(at: at) { [shard] in
            guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared,
                binding.leases[token] == lease
            else { return }
            binding.store.renew(key, lease: lease, duration: options.lease, on: shard.loop) { [shard] result in
                guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared,
                    binding.leases[token] == lease
                else { return }
                if case .success(false) = result {
                    // Another owner holds the record now: stop the effect if it has not committed.
                    binding.staleOwners.increment()
                    binding.logger.error("lease lost while the effect ran; cancelling it", metadata: ["record": "\(key)"])
                    binding.leases[token] = nil
                    _ = lane.cancelExecution(token, reason: .evicted, shard: shard)
                    return
                }
                lane.scheduleHeartbeat(token, key: key, lease: lease, every: period, shard: shard)
            }
        }
    }

    /// An execution holding a shared lease ended: write its result (or give the record back).
    /// Returns `false` when the execution held no shared lease (it ran under the local table).
    @usableFromInline
    func finishShared(_ token: EventToken, result: Result<Output, any Error>, execution: Execution, shard: GateShard) -> Bool {
        guard let binding = shared, let lease = binding.leases.removeValue(forKey: token),
            let options = binding.idempotency
        else { return false }
        binding.heartbeats.removeValue(forKey: token)?.cancel()
        let flight = binding.flights.removeValue(forKey: execution.record)
        let key = StoreKey(plugin: handle.plugin.name, key: execution.record)
        let isError: Bool
        switch result {
        case .success(let output): isError = handle.plugin.isFailure(output)
        case .failure(let error):
            if execution.isCancelling || error is CancellationError {
                releaseRecord(key, lease: lease, attempt: 0, shard: shard)
                return true
            }
            isError = true
        }
        guard !(isError && !options.cacheErrors), let bytes = StoredResult.encode(result) else {
            releaseRecord(key, lease: lease, attempt: 0, shard: shard)
            return true
        }
        binding.unwritten[execution.record] = SharedLaneState.Unwritten(
            fingerprint: flight?.fingerprint ?? "", lease: lease, result: result, bytes: bytes)
        writeResult(execution.record, attempt: 0, shard: shard)
        return true
    }

    /// Writes an unwritten result, retrying with backoff (50 ms doubling to 2 s) until the store
    /// takes or refuses it.
    func writeResult(_ record: String, attempt: Int, shard: GateShard) {
        guard let binding = shared, let options = binding.idempotency, let unwritten = binding.unwritten[record] else {
            return
        }
        let key = StoreKey(plugin: handle.plugin.name, key: record)
        let index = self.index
        let lease = unwritten.lease
        binding.store.complete(key, lease: lease, fingerprint: unwritten.fingerprint, result: unwritten.bytes, retention: options.retention, on: shard.loop)
        { [shard] result in
            guard let lane = shard.lane(index, as: Plugin.self), let binding = lane.shared,
                binding.unwritten[record]?.lease == lease
            else { return }
            switch result {
            case .success(true):
                binding.unwritten[record] = nil
            case .success(false):
                binding.unwritten[record] = nil
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
        binding.store.release(key, lease: lease, on: shard.loop) { [shard] result in
            guard case .failure = result, attempt < 5, let lane = shard.lane(index, as: Plugin.self) else { return }
            lane.retry(after: attempt, shard: shard) { lane in lane.releaseRecord(key, lease: lease, attempt: attempt + 1, shard: shard) }
        }
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

    /// Gives back the shared record of a drained execution. Returns `false` when the execution
    /// held no shared lease.
    @usableFromInline
    func releaseShared(_ token: EventToken, record: String, shard: GateShard) -> Bool {
        guard let binding = shared, let lease = binding.leases.removeValue(forKey: token) else { return false }
        binding.heartbeats.removeValue(forKey: token)?.cancel()
        binding.flights[record] = nil
        releaseRecord(StoreKey(plugin: handle.plugin.name, key: record), lease: lease, attempt: 0, shard: shard)
        return true
    }

    /// Stops the store's timers and answers the requests still waiting for it (the gate drains).
    @usableFromInline
    func drainShared(reason: CancellationReason, shard: GateShard) {
        guard let binding = shared else { return }
        for timer in binding.heartbeats.values { timer.cancel() }
        for timer in binding.polls.values { timer.cancel() }
        binding.heartbeats.removeAll()
        binding.polls.removeAll()
        let pending = waiters.keys.filter { waiters[$0]?.execution == Self.pendingDecision }
        for token in pending { answer(token, with: .cancelled(reason), shard: shard) }
    }
}
