import CoreMetrics
import SluiceCore

/// A limit chain (``GatePlugin/limits``) decided by the plugin's shared store: every instance
/// counts the same rates and slots. A throttle or rate-limit policy is decided with the chain,
/// as its first stage, in one answer; an idempotent plugin's chain is decided once the store
/// granted its claim (a replay, a join or a refusal of the record never reaches it). When the
/// store fails, the chain decides in this process (`open` and `local`) or the request is refused
/// (`closed`).
extension PluginLane {
    /// Whether the plugin's shared store decides its limit chain.
    var storeDecidesChain: Bool { shared != nil && !limits.isEmpty }

    /// The stages of the limit chain for `input`, as the store takes them.
    func chainStages(for input: Plugin.Input, binding: SharedLaneState<Output>) -> [StoreStage] {
        let plugin = handle.plugin.name
        return limitStages.map { keyed in
            let stage = keyed.stage
            let limit: StoreStage.Limit =
                switch stage.limit {
                case .rate(let options): .rate(options)
                case .concurrency(let slots): .concurrency(limit: slots, lease: binding.slotLease)
                }
            return StoreStage(scope: "\(plugin)/\(stage.name)", key: keyed.key(input), limit: limit, shadow: stage.shadow)
        }
    }

    /// Sends a throttle or rate-limit policy (`policy`, the first stage) and the chain to the
    /// store in one decision, the request pending until it answers.
    func submitSharedChain(
        _ request: GateRequest<Plugin>, token: EventToken, later: () -> Completion, shard: GateShard,
        binding: SharedLaneState<Output>, policy: StoreStage
    ) -> Decision {
        if let refused = addPending(request, token: token, later: later, shard: shard) { return .decided(refused) }
        let stages = [policy] + chainStages(for: request.input, binding: binding)
        let cost = handle.plugin.cost(for: request.input)
        let owner = owner(of: token, shard: shard, binding: binding)
        let index = self.index
        binding.store.admitChain(stages, cost: cost, owner: owner, on: shard.loop) { [shard] result in
            shard.withLane(index, as: Plugin.self) {
                $0.policyChainAnswered(request, token: token, stages: stages, cost: cost, owner: owner, result: result, shard: shard)
            }
        }
        return .waiting(token)
    }

    func policyChainAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, stages: [StoreStage], cost: Int, owner: String,
        result: Result<StoreAdmission, StoreError>, shard: GateShard
    ) {
        guard let binding = shared else { return }
        let admission: StoreAdmission
        switch result {
        case .success(let answered): admission = answered
        case .failure:
            limitFailedOver(request, token: token, shard: shard)
            return
        }
        countShadowRefusals(admission, firstChainStage: 1)
        switch admission.result {
        case .admitted:
            let pass = storePass(stages, admission: admission, cost: cost, owner: owner, firstChainStage: 1, binding: binding, shard: shard)
            var decision: RateLimitDecision?
            if case .stage(.rate(let policyDecision)) = admission.verdicts.first { decision = policyDecision }
            runDecided(request, token: token, rateLimit: decision, limits: pass, shard: shard)
        case .refused(0):
            switch admission.verdicts.first {
            case .throttle(let wait, _):
                answerPending(token, with: .throttled(retryAfter: wait ?? .zero), shard: shard)
            case .stage(let verdict):
                answerPending(token, with: .limited(LimitRefusal(stage: handle.plugin.name, verdict: verdict)), shard: shard)
            case nil:
                answerPending(token, with: .busy, shard: shard)
            }
        case .refused(let stage):
            answerPending(token, with: storeChainRefusal(admission, refusing: stage - 1, firstChainStage: 1, cost: cost), shard: shard)
        case .busy:
            answerPending(token, with: .busy, shard: shard)
        }
    }

    /// Asks the store to decide the chain of `request`, whose record the store just granted
    /// under `lease`: it runs once the chain admits it.
    func admitClaimedChain(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, lease: StoreLease, sentAt: Instant,
        shard: GateShard, binding: SharedLaneState<Output>
    ) {
        let stages = chainStages(for: request.input, binding: binding)
        let cost = handle.plugin.cost(for: request.input)
        let owner = owner(of: token, shard: shard, binding: binding)
        let index = self.index
        binding.store.admitChain(stages, cost: cost, owner: owner, on: shard.loop) { [shard] result in
            shard.withLane(index, as: Plugin.self) {
                $0.claimedChainAnswered(
                    request, token: token, identity: identity, lease: lease, sentAt: sentAt, stages: stages, cost: cost,
                    owner: owner, result: result, shard: shard)
            }
        }
    }

    func claimedChainAnswered(
        _ request: GateRequest<Plugin>, token: EventToken, identity: RequestIdentity, lease: StoreLease, sentAt: Instant,
        stages: [StoreStage], cost: Int, owner: String, result: Result<StoreAdmission, StoreError>, shard: GateShard
    ) {
        guard let binding = shared else { return }
        // `nil`: decided in this process.
        var pass: LimitPass?
        var refusal: GateOutcome<Output>?
        switch result {
        case .failure:
            binding.countFallback()
            if binding.failureMode == .closed { refusal = .unavailable }
        case .success(let admission):
            countShadowRefusals(admission, firstChainStage: 0)
            switch admission.result {
            case .admitted:
                pass = storePass(stages, admission: admission, cost: cost, owner: owner, firstChainStage: 0, binding: binding, shard: shard)
            case .refused(let stage):
                refusal = storeChainRefusal(admission, refusing: stage, firstChainStage: 0, cost: cost)
            case .busy:
                refusal = .busy
            }
        }
        let key = storeKey(identity.record)
        if refusal == nil, isPending(token),
            binding.flights[identity.record] != nil || binding.unwritten[identity.record] != nil
        {
            // This process took the record again meanwhile (this lease ran out while the chain
            // was decided, and a later claim here won it): this request's part goes back (its
            // lease is stale, so the store keeps the record), and it is answered from what holds
            // the record here, as a duplicate is.
            if let pass { giveBack(pass, now: shard.now) }
            releaseRecord(key, lease: lease, attempt: 0, shard: shard)
            let joins = (identity.concurrent ?? binding.idempotency?.concurrent) != .reject
            answerFromHeldRecord(request, token: token, identity: identity, joins: joins, shard: shard, binding: binding)
            return
        }
        if refusal == nil, isPending(token) {
            // It starts, or refuses having given back what `pass` holds (a claim answered too
            // late to start under its lease included).
            refusal = runClaimed(
                request, token: token, identity: identity, lease: lease, sentAt: sentAt, limits: pass, shard: shard,
                binding: binding)
            if refusal == nil { return }
        } else if let pass {
            giveBack(pass, now: shard.now)
        }
        // Nothing ran: the record goes back, so that nothing is stored for it.
        releaseRecord(key, lease: lease, attempt: 0, shard: shard)
        recordQuota?.value.refund(key: request.key, quantity: 1, now: shard.now)
        answerPending(token, with: refusal ?? .cancelled(.scopeClosed), shard: shard)
    }

    /// What a request the store admitted holds there, its slots renewed from now on.
    func storePass(
        _ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, firstChainStage: Int,
        binding: SharedLaneState<Output>, shard: GateShard
    ) -> LimitPass {
        let hold = StoreLimitHold(
            stages: stages, admission: admission, owner: owner, cost: cost, store: binding.store, loop: shard.loop,
            clock: shard.clock, slotsLost: binding.slotsLost)
        hold.startRenewing()
        return LimitPass(stored: hold, reports: storeRateReports(admission, upTo: limits.stages.count, firstChainStage: firstChainStage))
    }

    /// The refusal of chain stage `refusing`, reporting every rate stage up to it as it is after
    /// this request gave back what it took.
    func storeChainRefusal(
        _ admission: StoreAdmission, refusing: Int, firstChainStage: Int, cost: Int
    ) -> GateOutcome<Output> {
        guard case .stage(let verdict) = admission.verdicts[refusing + firstChainStage] else { return .busy }
        let reports = storeRateReports(admission, upTo: refusing + 1, firstChainStage: firstChainStage) { index, decision, options in
            index < refusing && decision.allowed ? Self.unspent(decision, cost: cost, options: options) : decision
        }
        return .limited(LimitRefusal(stage: limits.stages[refusing].name, verdict: verdict, reports: reports))
    }

    /// The reports of the rate stages among the chain's first `count` stages, read from the
    /// store's answer; `adjusted` gives the decision to report for a stage (its index, its
    /// decision as the store answered it, its options).
    func storeRateReports(
        _ admission: StoreAdmission, upTo count: Int, firstChainStage: Int,
        adjusted: (Int, RateLimitDecision, RateLimitOptions) -> RateLimitDecision = { _, decision, _ in decision }
    ) -> [RateStageReport] {
        var reports: [RateStageReport] = []
        for (index, stage) in limits.stages.enumerated().prefix(count) {
            guard case .rate(let options) = stage.limit, case .stage(.rate(let decision)) = admission.verdicts[index + firstChainStage]
            else { continue }
            reports.append(RateStageReport(stage: stage.name, options: options, decision: adjusted(index, decision, options)))
        }
        return reports
    }

    /// A GCRA decision that spent `cost`, as it reads once `cost` is given back.
    static func unspent(_ decision: RateLimitDecision, cost: Int, options: RateLimitOptions) -> RateLimitDecision {
        let emission = options.period / options.count
        return RateLimitDecision(
            allowed: true, limit: decision.limit, remaining: min(decision.limit, decision.remaining + max(0, cost)),
            retryAfter: nil, resetAfter: max(.zero, decision.resetAfter - emission * max(0, cost)))
    }

    /// Counts the chain's shadow stages that would have refused (the stages of the store's
    /// answer before `firstChainStage` are the policy's).
    func countShadowRefusals(_ admission: StoreAdmission, firstChainStage: Int) {
        for stage in admission.shadowRefusals where stage >= firstChainStage {
            shadowRefusals[stage - firstChainStage].increment()
            shadowCounts[stage - firstChainStage] += 1
        }
    }
}
