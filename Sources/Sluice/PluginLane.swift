import Metrics
import SluiceCore
import SluiceLibevent

/// One plugin's state in one shard: its policy table, the executions held or running for its
/// keys, the requests waiting for them, and the policy timers. It turns the pure policies'
/// decisions into tasks, timers and typed outcomes.
///
/// Vocabulary: an *execution* is one run of the plugin's effect (held by a timed policy until it
/// may run, then running as a task); a *waiter* is a request waiting for an execution's result.
/// Most executions have one waiter, the request that made them (a *single* execution, whose
/// waiter and execution share one token and one scope entry). Idempotent and single-flight
/// executions are *shared*: their own entry lives in the key's scope under the root, and each
/// request waits in its caller's scope. A waiter that leaves a shared execution is answered at
/// once and the execution goes on (idempotent) or is cancelled once no waiter remains
/// (single-flight); a single execution whose waiter leaves is cancelled.
///
/// Every method runs on the loop of the shard that holds the lane (its `shard` parameter). Its
/// stored properties skip the runtime's dynamic exclusivity checks (`@exclusivity(unchecked)`):
/// one thread touches them, and no access to one overlaps another (completions, which may call
/// back into the gate, are called only after the lane's own mutations are done). The checks
/// cost tens of nanoseconds per decision otherwise.
@usableFromInline
final class PluginLane<Plugin: GatePlugin>: GateLane {
    @usableFromInline typealias Output = Plugin.Output
    @usableFromInline typealias Completion = @Sendable (GateOutcome<Output>) -> Void

    @usableFromInline
    enum Kind {
        case single
        case idempotent
        case singleFlight
    }

    @usableFromInline
    enum State {
        case held
        case running
        case cancelling(CancellationReason)
    }

    @usableFromInline
    struct Execution {
        @usableFromInline let key: String
        @usableFromInline let input: Plugin.Input
        @usableFromInline let effectID: EffectID
        @usableFromInline let kind: Kind
        /// The idempotency record or the single-flight record; empty for single executions.
        @usableFromInline let record: String
        @usableFromInline var state: State
        @usableFromInline var task: Task<Void, Never>?
        @usableFromInline var rateLimit: RateLimitDecision?
        /// The request that made it (the same token as the execution for single ones).
        @usableFromInline let leader: EventToken
        /// Idempotent duplicates that joined; single-flight waiters still owed the result after
        /// the flight was forgotten (on cancellation).
        @usableFromInline var joiners: [EventToken] = []
        /// The effect passed its commit point (``EffectContext/commit()``): a drain lets it
        /// finish rather than cancel it.
        @usableFromInline var committed = false

        @inlinable
        init(
            key: String, input: Plugin.Input, effectID: EffectID, kind: Kind, record: String, state: State,
            leader: EventToken
        ) {
            self.key = key
            self.input = input
            self.effectID = effectID
            self.kind = kind
            self.record = record
            self.state = state
            self.leader = leader
        }

        @inlinable
        var isCancelling: Bool {
            if case .cancelling = state { return true }
            return false
        }

        @inlinable
        var cancellationReason: CancellationReason? {
            if case .cancelling(let reason) = state { return reason }
            return nil
        }
    }

    @usableFromInline
    struct Waiter {
        /// The execution it waits for.
        @usableFromInline let execution: EventToken
        @usableFromInline var completion: Completion?
        @usableFromInline let source: RunInfo.Source

        @inlinable
        init(execution: EventToken, completion: Completion?, source: RunInfo.Source) {
            self.execution = execution
            self.completion = completion
            self.source = source
        }
    }

    @usableFromInline
    enum Mode {
        case timed
        case rateLimit
        case idempotent
        case singleFlight
        case switchLatest
        case unrestricted
    }

    /// Side-state estimates charged to the budget: an execution (its record, its task with the
    /// task's allocator slab and first frames, a continuation, a timer) and a waiting request
    /// (its record, its completion and the front's reply slot). Measured on a release
    /// `sluice-echo` as the RSS rise per request with 20,000 requests in flight: about 3.7 KiB
    /// for a request that runs an effect sleeping on a timer, about 420 B for one that joins
    /// another's execution. Undercounted, a flood of unique keys would hold far more memory
    /// than the budget says.
    @inlinable static var executionBytes: Int { MemoryLayout<Execution>.stride + 3_328 }
    @inlinable static var waiterBytes: Int { MemoryLayout<Waiter>.stride + 384 }

    @usableFromInline let handle: PluginHandle<Plugin>
    /// Live keys evicted from the policy table (each may have changed a decision), exported
    /// as `sluice_evictions_total{plugin}` by the sweep.
    let evictionMetric: Counter
    /// Outcomes by kind and effect durations.
    @usableFromInline let metrics: OutcomeMetrics
    /// Evictions already added to `evictionMetric`.
    var evictionsReported = 0
    @usableFromInline let mode: Mode
    @usableFromInline let cancelInFlight: Bool
    @usableFromInline @exclusivity(unchecked) var throttle: ThrottleTable<String>?
    @usableFromInline @exclusivity(unchecked) var debounce: DebounceTable<String>?
    @usableFromInline @exclusivity(unchecked) var rateLimit: RateLimitTable<String>?
    @usableFromInline @exclusivity(unchecked) var idempotency: IdempotencyTable<String, String, Result<Output, any Error>>?
    /// The quota of new idempotency records per key (GCRA), when the options set one.
    @usableFromInline @exclusivity(unchecked) var recordQuota: RateLimitTable<String>?
    @usableFromInline @exclusivity(unchecked) var sideBudget: SideStateBudget?
    @usableFromInline let tallyBudget: MemoryBudget
    /// The shared store the policy decides with, when the plugin was registered with one (its
    /// tables then hold the local fallback's state).
    @usableFromInline let shared: SharedLaneState<Output>?
    @usableFromInline @exclusivity(unchecked) var tally: KeyTable<String, TallyState>?

    @usableFromInline @exclusivity(unchecked) var executions = SlotTable<EventToken, Execution>()
    @usableFromInline @exclusivity(unchecked) var waiters = SlotTable<EventToken, Waiter>()
    @usableFromInline @exclusivity(unchecked) var timers: [String: any GateTimer] = [:]
    @usableFromInline @exclusivity(unchecked) var switchLatest = SwitchLatest<String, EffectID>()
    @usableFromInline @exclusivity(unchecked) var flights = SingleFlight<String>()

    /// The request `submit` is deciding about, and its outcome if its effect ended before
    /// `submit` returned (a task that never suspended).
    @usableFromInline @exclusivity(unchecked) var submitting: EventToken?
    @usableFromInline @exclusivity(unchecked) var immediate: GateOutcome<Output>?
    /// The execution that ended while `launch` was starting its task, if any.
    @usableFromInline @exclusivity(unchecked) var endedSynchronously: EventToken?

    init(
        handle: PluginHandle<Plugin>, budget: MemoryBudget, tallyBudget: MemoryBudget, store: PluginStore,
        epochWatch: StoreEpochWatch
    ) throws(SluiceError) {
        self.handle = handle
        self.tallyBudget = tallyBudget
        self.evictionMetric = Counter(label: "sluice_evictions_total", dimensions: [("plugin", handle.plugin.name)])
        self.metrics = OutcomeMetrics(plugin: handle.plugin.name)
        self.shared = store.shared.map {
            SharedLaneState(
                store: store, shared: $0, policy: handle.plugin.policy, plugin: handle.plugin.name, epochWatch: epochWatch)
        }
        var cancelInFlight = false
        switch try store.localPolicy(for: handle.plugin.policy) {
        case .throttle(let options):
            mode = .timed
            throttle = try ThrottleTable(options: options, budget: budget)
        case .debounce(let options, let switchLatest):
            mode = .timed
            cancelInFlight = switchLatest
            debounce = try DebounceTable(options: options, budget: budget)
        case .rateLimit(let options):
            mode = .rateLimit
            rateLimit = try RateLimitTable(options: options, budget: budget)
        case .idempotent(let options):
            mode = .idempotent
            idempotency = try IdempotencyTable(options: options, budget: budget)
            if let perKey = options.recordsPerKey {
                // A state per key that opened a record lately: 16 bytes and its key, in a
                // table of its own an eighth the size of the records' budget.
                recordQuota = try RateLimitTable(
                    options: RateLimitOptions(count: perKey, per: options.retention, burst: perKey - 1),
                    budget: MemoryBudget(
                        entries: budget.entries.map { max(64, $0 / 8) }, bytes: budget.bytes.map { max(64 << 10, $0 / 8) }))
            }
        case .singleFlight:
            mode = .singleFlight
            sideBudget = SideStateBudget(budget)
        case .switchLatest:
            mode = .switchLatest
            cancelInFlight = true
            sideBudget = SideStateBudget(budget)
        case .unrestricted:
            mode = .unrestricted
            sideBudget = SideStateBudget(budget)
        }
        self.cancelInFlight = cancelInFlight
        if let bytes = budget.bytes, bytes < Self.executionBytes + Self.waiterBytes, sideBudget != nil {
            throw .invalidOption("The memory budget is too small for a single request.", value: budget)
        }
    }

    @inlinable var index: Int { handle.index }

    // MARK: - Submitting

    /// Decides about `request` at the shard's `now`. Returns the outcome when it is known before
    /// this returns; otherwise calls `later` once for the completion that will receive it.
    @inlinable
    func submit(_ request: GateRequest<Plugin>, later: @Sendable () -> Completion, shard: GateShard) -> GateOutcome<Output>? {
        // A request whose caller's scope has closed changes no policy state.
        guard !request.scope.isClosed else { return .cancelled(.scopeClosed) }
        let token = shard.makeToken()
        shard.lastSubmittedToken = token
        if let shared { return submitShared(request, token: token, later: later, shard: shard, binding: shared) }
        switch mode {
        case .timed:
            return submitTimed(request, token: token, later: later, shard: shard)
        case .rateLimit:
            return submitRateLimit(request, token: token, later: later, shard: shard)
        case .idempotent:
            return submitIdempotent(request, token: token, later: later, shard: shard)
        case .singleFlight:
            return submitSingleFlight(request, token: token, later: later, shard: shard)
        case .switchLatest:
            cancelRunning(key: request.key, effectID: request.effectID, shard: shard)
            return runSingle(request, token: token, later: later, shard: shard)
        case .unrestricted:
            return runSingle(request, token: token, later: later, shard: shard)
        }
    }

    @inlinable
    func submitRateLimit(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        let cost = handle.plugin.cost(for: request.input)
        let now = shard.clock.now
        guard let decision = try? rateLimit?.check(key: request.key, now: now, quantity: cost) else {
            return .busy
        }
        guard decision.allowed else { return .limited(decision) }
        if let outcome = runInPlace(request, rateLimit: decision, shard: shard) { return outcome }
        if let refused = admit(request, token: token, kind: .single, record: "", shard: shard) {
            // Refused after the limiter allowed it (its budget is spent, or its scope closed
            // meanwhile): a refused request spends nothing.
            rateLimit?.refund(key: request.key, quantity: cost, now: now)
            return refused
        }
        executions.update(token) { $0.rateLimit = decision }
        return launchAndWait(token, later: later, shard: shard)
    }

    @inlinable
    func submitTimed(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        let key = request.key
        let now = shard.clock.now
        // libevent runs socket callbacks before the timers of the same iteration: deliver a timer
        // that is already due first, so the event sees the state it would have after it.
        if !timers.isEmpty, let timer = timers[key], timer.deadline <= now {
            timer.cancel()
            timerFired(key: key, shard: shard)
        }
        let keyed: KeyedDecision?
        do {
            keyed = try throttle?.event(token, key: key, now: now) ?? debounce?.event(token, key: key, now: now)
        } catch {
            return .busy
        }
        guard let keyed else { return .busy }
        for evicted in keyed.evictedPending {
            // Another key's held request lost its state to make room: it will never run.
            _ = cancelExecution(evicted, reason: .evicted, shard: shard)
        }
        switch keyed.decision {
        case .run:
            if cancelInFlight { cancelRunning(key: key, effectID: request.effectID, shard: shard) }
            return runSingle(request, token: token, later: later, shard: shard)
        case .drop(let retryAfter):
            return .throttled(retryAfter: retryAfter)
        case .hold(let schedule, let superseded):
            if let superseded { answerHeld(superseded, with: .superseded, shard: shard) }
            if cancelInFlight { cancelRunning(key: key, effectID: request.effectID, shard: shard) }
            // A refused hold leaves the table naming this token as its pending event; when its
            // timer fires there is no execution to run, and nothing happens.
            if let refused = admit(request, token: token, kind: .single, record: "", shard: shard) { return refused }
            waiters.update(token) { $0.completion = later() }
            if let schedule { armTimer(key: key, at: schedule, shard: shard) }
            return nil
        }
    }

    @inlinable
    func submitIdempotent(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        let identity = handle.plugin.identity(for: request.input)
        let decision: IdempotencyDecision<Result<Output, any Error>>?
        do {
            // The owner runs in this process, which completes or releases its record: no lease
            // runs out under a live owner, however long it works.
            decision = try idempotency?.begin(
                key: identity.record, fingerprint: identity.fingerprint, token: token, now: shard.clock.now,
                lease: .untilReleased, concurrent: identity.concurrent)
        } catch {
            return .busy
        }
        switch decision {
        case .execute:
            if recordQuota != nil {
                // A quota table that cannot hold the key refuses too.
                let decision = try? recordQuota?.check(key: request.key, now: shard.clock.now)
                guard decision?.allowed == true else {
                    idempotency?.cancel(key: identity.record, owner: token)
                    return .busy
                }
            }
            if let refused = admit(request, token: token, kind: .idempotent, record: identity.record, shard: shard) {
                idempotency?.cancel(key: identity.record, owner: token)
                recordQuota?.refund(key: request.key, quantity: 1, now: shard.clock.now)
                return refused
            }
            return launchAndWait(token, later: later, shard: shard)
        case .join(let owner):
            return join(request, token: token, owner: owner, later: later, shard: shard)
        case .conflict:
            return .conflict
        case .replay(.success(let output)):
            return .ran(output, .replayed)
        case .replay(.failure(let error)):
            return .failed(error, .replayed)
        case .mismatch:
            return .mismatch
        case nil:
            return .busy
        }
    }

    @inlinable
    func submitSingleFlight(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        let record = handle.plugin.identity(for: request.input).record
        switch flights.begin(token, key: record) {
        case .lead:
            if let refused = admit(request, token: token, kind: .singleFlight, record: record, shard: shard) {
                flights.forget(key: record)
                return refused
            }
            return launchAndWait(token, later: later, shard: shard)
        case .join(let leader):
            return join(request, token: token, owner: leader, later: later, shard: shard)
        }
    }

    /// Runs a single execution for `request` now.
    @inlinable
    func runSingle(
        _ request: GateRequest<Plugin>, token: EventToken, later: @Sendable () -> Completion, shard: GateShard
    ) -> GateOutcome<Output>? {
        if let outcome = runInPlace(request, rateLimit: nil, shard: shard) { return outcome }
        if let refused = admit(request, token: token, kind: .single, record: "", shard: shard) { return refused }
        return launchAndWait(token, later: later, shard: shard)
    }

    /// Runs an effect that never suspends in place (``GatePlugin/runImmediately(_:context:)``):
    /// no task, no execution, no scope entry, nothing charged, since nothing is held. Returns
    /// `nil` when the plugin's effect runs as a task.
    @inlinable
    func runInPlace(_ request: GateRequest<Plugin>, rateLimit decision: RateLimitDecision?, shard: GateShard) -> GateOutcome<Output>? {
        let context = EffectContext(key: request.key, effectID: request.effectID, shard: shard, lane: index, execution: nil)
        // Read as whole nanoseconds: no `Duration` arithmetic on a path taken for every tap.
        let start = EventLoop.monotonicNow().nanoseconds
        let result: Result<Output, any Error>
        do {
            guard let output = try handle.plugin.runImmediately(request.input, context: context) else { return nil }
            result = .success(output)
        } catch {
            result = .failure(error)
        }
        metrics.effectDuration.recordNanoseconds(EventLoop.monotonicNow().nanoseconds &- start)
        return outcome(result, reason: nil, source: .executed, rateLimit: decision)
    }

    /// Adds a held execution for `request` (token `token`) with its leading waiter, charged to
    /// the budget and registered in the scopes. Returns the outcome of a refusal, or `nil`.
    @inlinable
    func admit(
        _ request: GateRequest<Plugin>, token: EventToken, kind: Kind, record: String, shard: GateShard
    ) -> GateOutcome<Output>? {
        let now = shard.clock.now
        guard charge(Self.executionBytes, now: now) else { return .busy }
        guard charge(Self.waiterBytes, now: now) else {
            release(Self.executionBytes)
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
            return .cancelled(.scopeClosed)
        }
        if shared {
            _ = shard.registerEntry(token, id: request.effectID, key: request.key, scope: nil,
                                    tag: Self.tag(lane: index, isExecution: true))
        }
        executions.set(
            Execution(
                key: request.key, input: request.input, effectID: request.effectID, kind: kind, record: record,
                state: .held, leader: waiter),
            for: token)
        waiters.set(Waiter(execution: token, completion: nil, source: .executed), for: waiter)
        if shared { shard.lastSubmittedToken = waiter }
        return nil
    }

    /// Adds `request` as a waiter of the shared execution `owner`.
    @inlinable
    func join(
        _ request: GateRequest<Plugin>, token: EventToken, owner: EventToken, later: @Sendable () -> Completion,
        shard: GateShard
    ) -> GateOutcome<Output>? {
        guard executions.contains(owner) else {
            // Cannot happen: a record in flight or a flight always has its execution here.
            // Refuse rather than guess.
            if mode == .singleFlight { _ = flights.leave(token, key: handle.plugin.identity(for: request.input).record) }
            return .conflict
        }
        guard charge(Self.waiterBytes, now: shard.clock.now) else {
            if mode == .singleFlight { _ = flights.leave(token, key: handle.plugin.identity(for: request.input).record) }
            return .busy
        }
        guard shard.registerEntry(token, id: request.effectID, key: request.key, scope: request.scope,
                                  tag: Self.tag(lane: index, isExecution: false))
        else {
            release(Self.waiterBytes)
            if mode == .singleFlight { _ = flights.leave(token, key: handle.plugin.identity(for: request.input).record) }
            return .cancelled(.scopeClosed)
        }
        waiters.set(Waiter(execution: owner, completion: later(), source: .joined), for: token)
        if mode == .idempotent { executions.update(owner) { $0.joiners.append(token) } }
        return nil
    }

    // MARK: - Running

    /// Launches execution `token` and returns its outcome if it ended before this returns;
    /// otherwise gives its leading waiter the completion `later` makes.
    @inlinable
    func launchAndWait(_ token: EventToken, later: @Sendable () -> Completion, shard: GateShard) -> GateOutcome<Output>? {
        immediate = nil
        guard let leader = launch(token, shard: shard) else { return .cancelled(.requested) }
        submitting = nil
        if let outcome = immediate.take() {
            return outcome
        }
        guard waiters.update(leader, { $0.completion = later() }) != nil else { return .cancelled(.requested) }
        return nil
    }

    /// Starts a held execution's task. Returns the request that leads it, or `nil` if it was not
    /// held. While the task runs synchronously, that request is the one `submit` answers with
    /// the outcome, if the effect ends before it suspends.
    @inlinable
    @discardableResult
    func launch(_ token: EventToken, shard: GateShard) -> EventToken? {
        // Read what the task needs in place, and mark the execution running.
        let started = executions.update(token) {
            execution -> (key: String, input: Plugin.Input, effectID: EffectID, leader: EventToken)? in
            guard case .held = execution.state else { return nil }
            execution.state = .running
            return (execution.key, execution.input, execution.effectID, execution.leader)
        }
        guard let started = started ?? nil else { return nil }
        submitting = started.leader
        if cancelInFlight, let replaced = switchLatest.start(token, key: started.key, effect: started.effectID),
            replaced != token
        {
            _ = cancelExecution(replaced, reason: .replaced, shard: shard)
        }
        // The task captures little: the handle's storage (one reference), the input and the
        // context (which reaches the shard).
        let storage = handle.storage
        let input = started.input
        let context = EffectContext(key: started.key, effectID: started.effectID, shard: shard, lane: index, execution: token)
        let duration = metrics.effectDuration
        endedSynchronously = nil
        // Nonisolated and immediate: the effect starts on this thread now, and one that never
        // suspends has ended before `launch` returns. Its continuations run on the key's loop.
        let task = Task.immediate(executorPreference: shard.loop) { @concurrent () async -> Void in
            let result: Result<Output, any Error>
            let start = ContinuousClock.now
            do {
                result = .success(try await storage.plugin.run(input, context: context))
            } catch {
                result = .failure(error)
            }
            duration.recordNanoseconds((ContinuousClock.now - start).nanosecondsClamped)
            context.shard.effectEnded(lane: context.lane, execution: token, plugin: Plugin.self, result: result)
        }
        // An effect that never suspended has already ended (and is gone).
        if endedSynchronously != token {
            executions.update(token) { $0.task = task }
        }
        return started.leader
    }

    /// An execution's task returned: store its result if the policy keeps one, and answer its
    /// waiters.
    @inlinable
    func effectEnded(_ token: EventToken, result: Result<Output, any Error>, shard: GateShard) {
        guard let execution = executions.remove(token) else { return }
        endedSynchronously = token
        release(Self.executionBytes)
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
            if !finishShared(token, result: result, execution: execution, shard: shard) {
                store(result, of: execution, token: token, now: shard.clock.now)
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
            completion = idempotency?.complete(
                key: execution.record, owner: token, result: result, isError: handle.plugin.isFailure(output), now: now)
        case .failure(let error):
            if execution.isCancelling || Self.committedNothing(error) {
                // Cancelled (or refused by its commit guard) before committing: release the
                // record so a retry runs.
                idempotency?.cancel(key: execution.record, owner: token)
                completion = nil
            } else {
                completion = idempotency?.complete(key: execution.record, owner: token, result: result, isError: true, now: now)
            }
        }
        if completion == .released { recordQuota?.refund(key: execution.key, quantity: 1, now: now) }
    }

    @inlinable
    func outcome(
        _ result: Result<Output, any Error>, reason: CancellationReason?, source: RunInfo.Source, _ execution: Execution
    ) -> GateOutcome<Output> {
        outcome(result, reason: reason, source: source, rateLimit: execution.rateLimit)
    }

    /// The outcome an effect's result gives: what it returned or threw, or how it was cancelled.
    @inlinable
    func outcome(
        _ result: Result<Output, any Error>, reason: CancellationReason?, source: RunInfo.Source,
        rateLimit: RateLimitDecision?
    ) -> GateOutcome<Output> {
        switch result {
        case .success(let output):
            return .ran(output, RunInfo(source: source, rateLimit: rateLimit))
        case .failure(let error):
            if let reason { return .cancelled(reason) }
            if error is CancellationError { return .cancelled(.byEffect) }
            // Its commit guard stopped it (its lease was not safe): nothing was done, and a
            // retry replays the record's result or runs it.
            if error is CommitRefusal { return .unavailable }
            return .failed(error, RunInfo(source: source, rateLimit: rateLimit))
        }
    }

    /// Whether an effect that threw `error` committed nothing: it was cancelled, or its commit
    /// guard refused it.
    @inlinable
    static func committedNothing(_ error: any Error) -> Bool {
        error is CancellationError || error is CommitRefusal
    }

    /// Gives a waiting request its outcome and forgets it.
    @inlinable
    func answer(_ waiter: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        guard let entry = waiters.remove(waiter) else { return }
        release(Self.waiterBytes)
        shard.finishEntry(waiter)
        if let completion = entry.completion {
            metrics.count(outcome)
            completion(outcome)
        } else if waiter == submitting {
            immediate = outcome
        }
    }

    /// Answers every waiter of a held execution and forgets it.
    @inlinable
    func answerHeld(_ token: EventToken, with outcome: GateOutcome<Output>, shard: GateShard) {
        guard let execution = executions[token], case .held = execution.state else { return }
        executions.remove(token)
        release(Self.executionBytes)
        shard.executionEnded()
        if execution.kind != .single { shard.finishEntry(token) }
        answer(execution.leader, with: outcome, shard: shard)
        for joiner in execution.joiners { answer(joiner, with: outcome, shard: shard) }
    }

    // MARK: - Cancelling

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
            execution.task?.cancel()
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
            shard.timerFired(lane: index, key: key)
        }
    }

    @inlinable
    func timerFired(key: String, shard: GateShard) {
        timers[key] = nil
        let now = shard.clock.now
        switch throttle?.fire(key: key, now: now) ?? debounce?.fire(key: key, now: now) ?? .none {
        case .run(let token):
            guard let execution = executions[token], case .held = execution.state else { return }
            if cancelInFlight { cancelRunning(key: key, effectID: execution.effectID, shard: shard) }
            // Its waiters have their completions already: nothing is answered through `submit`.
            launch(token, shard: shard)
            submitting = nil
        case .reschedule(let deadline):
            armTimer(key: key, at: deadline, shard: shard)
        case .none:
            break
        }
    }

    // MARK: - Budget

    @inlinable
    func charge(_ bytes: Int, now: Instant) -> Bool {
        if let taken = throttle?.table.charge(bytes: bytes, now: now) { return taken }
        if let taken = debounce?.table.charge(bytes: bytes, now: now) { return taken }
        if let taken = rateLimit?.table.charge(bytes: bytes, now: now) { return taken }
        if let taken = idempotency?.table.charge(bytes: bytes, now: now) { return taken }
        return sideBudget?.charge(bytes: bytes) ?? false
    }

    @inlinable
    func release(_ bytes: Int) {
        throttle?.table.release(bytes: bytes)
        debounce?.table.release(bytes: bytes)
        rateLimit?.table.release(bytes: bytes)
        idempotency?.table.release(bytes: bytes)
        sideBudget?.release(bytes: bytes)
    }

    // MARK: - Upkeep

    @usableFromInline func sweep(now: Instant, maxEntries: Int) {
        throttle?.table.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        debounce?.table.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        rateLimit?.table.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        idempotency?.table.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        recordQuota?.table.sweepKeepingUp(now: now, minimumEntries: maxEntries)
        reportEvictions()
    }

    /// Adds the evictions since the last report to the metric.
    func reportEvictions() {
        guard let evicted = tableStats?.evicted, evicted > evictionsReported else { return }
        evictionMetric.increment(by: evicted - evictionsReported)
        evictionsReported = evicted
    }

    @inlinable
    func incrementTally(key: String, by amount: Int, now: Instant) -> Int {
        if tally == nil {
            tally = try? KeyTable(budget: tallyBudget, whenFull: .evictLeastRecentlyUsed)
        }
        return tally?.incrementCount(of: key, by: amount, now: now) ?? 0
    }


    /// The commit guard (see ``EffectContext/commit()``).
    @usableFromInline
    func commit(_ token: EventToken, shard: GateShard) -> Result<EffectRecord?, CommitRefusal> {
        guard let execution = executions[token] else {
            return .failure(
                CommitRefusal(code: .notRunning, message: "the effect is not running under the gate", value: "\(token.rawValue)"))
        }
        if let reason = execution.cancellationReason {
            return .failure(
                CommitRefusal(code: .cancelled, message: "the effect was cancelled before its commit point", value: "\(reason)"))
        }
        if let refusal = sharedLeaseRefusal(token, shard: shard) { return .failure(refusal) }
        executions.update(token) { $0.committed = true }
        return .success(record(of: token, shard: shard))
    }

    /// The record of an idempotent execution and the fence it holds: its shared lease's, or
    /// for a record in this process's table, one made from its token (``LocalFence``).
    @usableFromInline
    func record(of token: EventToken, shard: GateShard) -> EffectRecord? {
        guard let execution = executions[token], execution.kind == .idempotent else { return nil }
        let fence = shared?.leases[token]?.fence ?? LocalFence.of(token)
        return EffectRecord(plugin: handle.plugin.name, key: execution.key, record: execution.record, fence: fence)
    }

    @inlinable
    func drain(reason: CancellationReason, shard: GateShard) {
        for timer in timers.values { timer.cancel() }
        timers.removeAll()
        let tokens = executions.keys.sorted { $0.rawValue < $1.rawValue }
        for token in tokens {
            if let execution = executions[token], execution.committed, !execution.isCancelling {
                // Past its commit point: it finishes, its result is stored (and written to a
                // shared store), and its callers are answered with it.
                continue
            }
            if let execution = executions[token], execution.kind == .idempotent, holdsSharedLease(token) {
                // A payment holding a shared record may have committed already: its callers are
                // answered, but it is kept (and its lease renewed) until its task ends, so that
                // its result is still written, or its record given back if it did not commit.
                // Giving the record back now would let another instance charge it again.
                executions.update(token) {
                    $0.state = .cancelling(reason)
                    $0.joiners = []
                }
                execution.task?.cancel()
                shard.countCancelled()
                answer(execution.leader, with: .cancelled(reason), shard: shard)
                for joiner in execution.joiners { answer(joiner, with: .cancelled(reason), shard: shard) }
                continue
            }
            guard let execution = executions.remove(token) else { continue }
            release(Self.executionBytes)
            shard.executionEnded()
            execution.task?.cancel()
            if execution.kind == .idempotent { idempotency?.cancel(key: execution.record, owner: token) }
            if execution.kind != .single { shard.finishEntry(token) }
            shard.countCancelled()
            let joiners = execution.kind == .singleFlight
                ? (flights.forget(key: execution.record)?.joiners ?? []) + execution.joiners : execution.joiners
            answer(execution.leader, with: .cancelled(reason), shard: shard)
            for joiner in joiners { answer(joiner, with: .cancelled(reason), shard: shard) }
        }
        switchLatest = SwitchLatest()
        flights = SingleFlight()
        drainShared(reason: reason, shard: shard)
    }

    @inlinable
    var keyCount: Int {
        (throttle?.table.count ?? 0) + (debounce?.table.count ?? 0) + (rateLimit?.table.count ?? 0)
            + (idempotency?.table.count ?? 0)
    }

    @inlinable
    var executionCount: Int { executions.count }

    @inlinable
    var waiterCount: Int { waiters.count }

    @inlinable
    var tableStats: KeyTableStats? {
        throttle?.table.stats ?? debounce?.table.stats ?? rateLimit?.table.stats ?? idempotency?.table.stats
    }
}
