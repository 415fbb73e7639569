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
        _ request: GateRequest<Plugin>, token: EventToken, later: () -> Completion, shard: GateShard,
        binding: SharedLaneState<Output>
    ) -> Decision {
        let key = storeKey(request.key)
        let index = self.index
        switch binding.policy {
        case .throttle(let options) where storeDecidesChain:
            let policy = StoreStage(scope: handle.plugin.name, key: request.key, limit: .throttle(interval: options.interval))
            return submitSharedChain(request, token: token, later: later, shard: shard, binding: binding, policy: policy)
        case .rateLimit(let options) where storeDecidesChain:
            let policy = StoreStage(scope: handle.plugin.name, key: request.key, limit: .rate(options))
            return submitSharedChain(request, token: token, later: later, shard: shard, binding: binding, policy: policy)
        case .throttle(let options):
            if let refused = addPending(request, token: token, later: later, shard: shard) { return .decided(refused) }
            binding.store.throttle(key, interval: options.interval, on: shard.loop) { [shard] result in
                shard.withLane(index, as: Plugin.self) { $0.throttleAnswered(request, token: token, result: result, shard: shard) }
            }
            return .waiting(token)
        case .rateLimit(let options):
            let cost = handle.plugin.cost(for: request.input)
            if let refused = addPending(request, token: token, later: later, shard: shard) { return .decided(refused) }
            binding.store.rateLimit(key, options: options, cost: cost, on: shard.loop) { [shard] result in
                shard.withLane(index, as: Plugin.self) { $0.rateLimitAnswered(request, token: token, result: result, shard: shard) }
            }
            return .waiting(token)
        case .idempotent(let options):
            return submitSharedIdempotent(request, token: token, later: later, shard: shard, binding: binding, options: options)
        default:
            return .decided(.busy)
        }
    }

    // MARK: - Waiting for the store

    /// Registers `request` as a waiter with no execution yet. Returns the refusal, or `nil`.
    func addPending(
        _ request: GateRequest<Plugin>, token: EventToken, later: () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        guard charge(Self.waiterBytes, now: shard.now) else { return .busy }
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

    /// Answers the pending request `token` with `outcome` and forgets it (nothing, if it left
    /// while the store decided).
    func answerPending(_ token: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        guard let completion = takePending(token, shard: shard) else { return }
        deliver(completion, outcome, shard: shard)
    }

    /// Whether `token` still waits for the store's decision: it has not left, and no answer made
    /// it an execution's waiter yet (a store answers once, and tokens are never reused: this only
    /// keeps a second answer from touching an execution already made).
    func isPending(_ token: EventToken) -> Bool {
        waiters.update(token, { $0.execution == Self.pendingDecision }) == true
    }

    /// Makes an execution of `kind` for `request`, led by the pending request `token` as it is.
    /// Its waiter was registered in its caller's scope and charged when it began waiting for the
    /// store, so only the execution is charged; a shared execution also gets a token of its own
    /// and its own entry in the key's scope under the root, as every shared execution has. The
    /// execution holds what `pass` took. Returns its token, or `nil` when the budget cannot take
    /// it (having given back what `pass` took).
    func leadPending(
        _ request: GateRequest<Plugin>, token: EventToken, kind: Kind, record: String, limits pass: LimitPass,
        rateLimit decision: RateLimitDecision?, shard: GateShard
    ) -> EventToken? {
        let now = shard.now
        guard charge(Self.executionBytes, now: now) else {
            giveBack(pass, now: now)
            return nil
        }
        let execution = kind == .single ? token : shard.makeToken()
        if kind != .single {
            _ = shard.registerEntry(
                execution, id: request.effectID, key: request.key, scope: nil, tag: Self.tag(lane: index, isExecution: true))
        }
        var made = Execution(
            key: request.key, input: request.input, effectID: request.effectID, kind: kind, record: record, state: .held,
            leader: token)
        made.limits = pass.keptByExecution
        made.rateLimit = decision
        executions.set(made, for: execution)
        waiters.update(token) { $0.execution = execution }
        return execution
    }

    /// Runs the pending request `token` now as a single execution, which its waiter leads as it
    /// is (``leadPending(_:token:kind:record:limits:rateLimit:shard:)``): nothing is registered,
    /// charged or released twice. The limits decide first, in this process, unless the store
    /// decided them (`decided`: what the request holds there, given back if it does not run).
    /// Nothing, if it left while the store decided.
    func runDecided(
        _ request: GateRequest<Plugin>, token: EventToken, rateLimit decision: RateLimitDecision?,
        limits decided: LimitPass? = nil, shard: GateShard
    ) {
        let now = shard.now
        guard isPending(token) else {
            if let decided { giveBack(decided, now: now) }
            return
        }
        // A store's late answer starts nothing once the gate drains.
        guard !shard.isDraining else {
            if let decided { giveBack(decided, now: now) }
            answerPending(token, with: .shuttingDown, shard: shard)
            return
        }
        var pass = decided ?? .none
        if decided == nil, let refused = passLimits(request.input, now: now, into: &pass) {
            answerPending(token, with: refused, shard: shard)
            return
        }
        if let outcome = runInPlace(request, rateLimit: decision, limits: pass, shard: shard) {
            answerPending(token, with: outcome, shard: shard)
            return
        }
        guard
            let execution = leadPending(
                request, token: token, kind: .single, record: "", limits: pass, rateLimit: decision, shard: shard)
        else {
            answerPending(token, with: .busy, shard: shard)
            return
        }
        launch(execution, shard: shard)
    }

    // MARK: - Throttle and rate limit

    func throttleAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, result: Result<Duration?, StoreError>, shard: GateShard
    ) {
        switch result {
        case .success(nil):
            runDecided(request, token: token, rateLimit: nil, shard: shard)
        case .success(.some(let retryAfter)):
            answerPending(token, with: .throttled(retryAfter: retryAfter), shard: shard)
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
            guard decision.allowed else {
                answerPending(token, with: .limited(LimitRefusal(stage: handle.plugin.name, verdict: .rate(decision))), shard: shard)
                return
            }
            runDecided(request, token: token, rateLimit: decision, shard: shard)
        case .failure:
            limitFailedOver(request, token: token, shard: shard)
        }
    }

    /// A throttle or rate limit whose store failed: open runs it, closed refuses it, local
    /// decides with this process's table (the divided limits).
    func limitFailedOver(_ request: GateRequest<Plugin>, token: EventToken, shard: GateShard) {
        guard let binding = shared, waiters.contains(token) else { return }
        binding.countFallback()
        switch binding.failureMode {
        case .closed:
            answerPending(token, with: .unavailable, shard: shard)
        case .open:
            runDecided(request, token: token, rateLimit: nil, shard: shard)
        case .local:
            // Decided again from the start by this process's own table, as a new request.
            guard let completion = takePending(token, shard: shard) else { return }
            let local = Self.locally(completion)
            let decision: Decision
            switch stage {
            case .rateLimit(let state): decision = submitRateLimit(request, keyHash: nil, token: token, table: state, shard: shard)
            case .throttle(let state): decision = submitTimed(request, keyHash: nil, token: token, table: state, later: { local }, shard: shard)
            case .debounce(let state, _): decision = submitTimed(request, keyHash: nil, token: token, table: state, later: { local }, shard: shard)
            case .idempotent, .singleFlight, .switchLatest, .unrestricted:
                // A shared store decides only throttles and rate limits this way.
                decision = .decided(.busy)
            }
            if let outcome = carryOut(decision, later: { local }, shard: shard) { deliver(local, outcome, shard: shard) }
        }
    }
}
