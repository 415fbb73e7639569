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
/// Every method runs with the lock of the shard that holds the lane (its `shard` parameter), on
/// whichever thread decides. Its stored properties skip the runtime's dynamic exclusivity checks
/// (`@exclusivity(unchecked)`): the lock orders every access, and no access to one overlaps
/// another (completions and effects, which may call back into the gate, run only once the lock
/// is released). The checks cost tens of nanoseconds per decision otherwise.
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
        /// What its request took from the plugin's limit chain.
        @usableFromInline var limits = LimitPass.none

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

        /// The key and idempotency record of an idempotent execution; `nil` for other kinds.
        @inlinable
        var idempotencyRecord: (key: String, record: String)? {
            kind == .idempotent ? (key, record) : nil
        }
    }

    @usableFromInline
    struct Waiter {
        /// The execution it waits for (``PluginLane/pendingDecision`` while a shared store
        /// decides about its request).
        @usableFromInline var execution: EventToken
        @usableFromInline var completion: Completion?
        @usableFromInline var source: RunInfo.Source
        /// The outcome of a leading waiter answered before its completion was installed (its
        /// effect ended without suspending), kept for ``PluginLane/installCompletion(_:later:)``.
        @usableFromInline var parked: GateOutcome<Output>?

        @inlinable
        init(execution: EventToken, completion: Completion?, source: RunInfo.Source) {
            self.execution = execution
            self.completion = completion
            self.source = source
        }
    }

    /// An execution a decision marked running, whose task its caller starts once the shard's
    /// lock is released, and the waiter of the request that leads it.
    @usableFromInline
    struct Launch {
        @usableFromInline let execution: EventToken
        @usableFromInline let leader: EventToken

        @inlinable
        init(execution: EventToken, leader: EventToken) {
            self.execution = execution
            self.leader = leader
        }
    }

    /// What the task of an execution marked running needs, read under the lock.
    @usableFromInline
    struct EffectStart {
        @usableFromInline let execution: EventToken
        @usableFromInline let input: Plugin.Input
        @usableFromInline let key: String
        @usableFromInline let effectID: EffectID

        @inlinable
        init(execution: EventToken, input: Plugin.Input, key: String, effectID: EffectID) {
            self.execution = execution
            self.input = input
            self.key = key
            self.effectID = effectID
        }
    }

    /// What deciding about a request leaves its caller with.
    @usableFromInline
    enum Decision {
        /// The outcome, known now.
        case decided(GateOutcome<Output>)
        /// The request waits under this token, its completion installed.
        case waiting(EventToken)
        /// The request leads an execution whose task its caller starts (then installs the
        /// leading waiter's completion, unless the effect has answered it already). Small on
        /// purpose: a decision is returned through every policy's path.
        case start(Launch)
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
    /// The policy table's evictions and summary, exported by the sweep.
    var tableMetrics: TableMetrics
    /// Outcomes by kind and effect durations.
    @usableFromInline let metrics: OutcomeMetrics
    /// The outcomes decided since the last report to `metrics`.
    @usableFromInline @exclusivity(unchecked) var decisions = DecisionCounts()
    /// The plugin's policy: its family and the state it decides with.
    @usableFromInline let stage: PolicyStage<Output>
    /// Starts loading a key's slot in the stage's table before the lane takes the lock: for a
    /// throttle, debounce or rate-limit stage decided here; `nil` for the others (see
    /// ``prefetch(key:)``).
    @usableFromInline let slotPrefetcher: KeySlotPrefetcher?
    /// Whether a newer execution of a key cancels the key's running one (switch-latest, or a
    /// debounce that switches to the latest).
    @usableFromInline let cancelInFlight: Bool
    @usableFromInline let tallyBudget: MemoryBudget
    /// The shared store the policy decides with, when the plugin was registered with one (its
    /// stage then holds the local fallback's state).
    @usableFromInline let shared: SharedLaneState<Output>?
    @usableFromInline @exclusivity(unchecked) var tally: KeyTable<String, TallyState>?
    /// The plugin's limits (``GatePlugin/limits``), decided after its policy, shared by the
    /// plugin's lanes in every shard; empty without.
    @usableFromInline let limits: PluginLimits
    /// The plugin's stages, whose key functions give each stage's key (``LimitStage/key``).
    /// Kept as the stages rather than an array of their functions: a function read out of a
    /// generic array is called through a reabstraction thunk, whose context is retained and
    /// released around every call.
    @usableFromInline let limitStages: [LimitStage<Plugin.Input>]
    /// `sluice_shadow_refusals_total{plugin, stage}` of each stage of `chain`: what a stage in
    /// shadow mode would have refused.
    @usableFromInline let shadowRefusals: [Counter]
    /// The same, counted here for ``Gate/statistics()``.
    @usableFromInline @exclusivity(unchecked) var shadowCounts: [Int]
    /// The buffer `passLimits` computes the keys of the stages in.
    @usableFromInline @exclusivity(unchecked) var stageKeyBuffer: [String]
    /// The chain's last decision, shared with the outcome of the request it admitted (see
    /// `decisionToWrite()`).
    @usableFromInline @exclusivity(unchecked) var chainDecision: ChainDecision

    @usableFromInline @exclusivity(unchecked) var executions = SlotTable<EventToken, Execution>()
    @usableFromInline @exclusivity(unchecked) var waiters = SlotTable<EventToken, Waiter>()
    @usableFromInline @exclusivity(unchecked) var timers: [String: any GateTimer] = [:]
    @usableFromInline @exclusivity(unchecked) var switchLatest = SwitchLatest<String, EffectID>()
    @usableFromInline @exclusivity(unchecked) var flights = SingleFlight<String>()

    /// Completions to call, with their outcomes, once the shard releases its lock.
    @usableFromInline @exclusivity(unchecked) var outbox: [(Completion, GateOutcome<Output>)] = []

    init(
        handle: PluginHandle<Plugin>, budget: MemoryBudget, tallyBudget: MemoryBudget, store: PluginStore,
        epochWatch: StoreEpochWatch, limits: PluginLimits
    ) throws(SluiceError) {
        self.handle = handle
        self.tallyBudget = tallyBudget
        self.tableMetrics = TableMetrics(plugin: handle.plugin.name)
        self.metrics = OutcomeMetrics(plugin: handle.plugin.name)
        self.shared = store.shared.map {
            SharedLaneState(
                store: store, shared: $0, policy: handle.plugin.policy, plugin: handle.plugin.name, epochWatch: epochWatch)
        }
        stage = try PolicyStage(try store.localPolicy(for: handle.plugin.policy), budget: budget)
        slotPrefetcher = shared == nil ? stage.slotPrefetcher : nil
        cancelInFlight = stage.cancelsInFlight
        self.limits = limits
        chainDecision = ChainDecision(stages: limits.stages)
        let stages = handle.plugin.limits
        limitStages = stages
        stageKeyBuffer = Array(repeating: "", count: stages.count)
        shadowCounts = Array(repeating: 0, count: stages.count)
        shadowRefusals = stages.map {
            Counter(label: "sluice_shadow_refusals_total", dimensions: [("plugin", handle.plugin.name), ("stage", $0.stage.name)])
        }
        if let bytes = budget.bytes, bytes < Self.executionBytes + Self.waiterBytes, stage.hasSideBudget {
            throw .invalidOption("The memory budget is too small for a single request.", value: budget)
        }
    }

    @inlinable var index: Int { handle.index }

    /// A plugin deciding with a shared store calls it on the shard's loop.
    @usableFromInline var decidesOnLoop: Bool { shared != nil }

    // MARK: - Submitting

    /// Hashes `key` for the stage's table and starts loading its slot, when the stage has a
    /// table indexed by the request's key; the hash to decide with (``submit(_:keyHash:later:shard:)``).
    /// Called without the shard's lock: it reads only `let`s.
    @inlinable
    func prefetch(key: String) -> UInt32? {
        guard let slotPrefetcher else { return nil }
        let hash = KeySlotPrefetcher.hash(key)
        slotPrefetcher.prefetch(hash: hash)
        return hash
    }

    /// Decides about `request` at the shard's `now`: its outcome, the token it waits under
    /// (its completion made by `later`), or the execution whose task its caller starts.
    /// `keyHash` is the key's hash from ``prefetch(key:)``, if it was called.
    @inlinable
    func submit(_ request: GateRequest<Plugin>, keyHash: UInt32?, later: () -> Completion, shard: GateShard) -> Decision {
        // A request whose caller's scope has closed changes no policy state.
        guard !request.scope.isClosed else { return .decided(.cancelled(.scopeClosed)) }
        let token = shard.makeToken()
        if let shared { return submitShared(request, token: token, later: later, shard: shard, binding: shared) }
        switch stage {
        case .throttle(let state):
            return submitTimed(request, keyHash: keyHash, token: token, table: state, later: later, shard: shard)
        case .debounce(let state, _):
            return submitTimed(request, keyHash: keyHash, token: token, table: state, later: later, shard: shard)
        case .rateLimit(let state):
            return submitRateLimit(request, keyHash: keyHash, token: token, table: state, shard: shard)
        case .idempotent(let records, let quota):
            return submitIdempotent(request, token: token, records: records, quota: quota, later: later, shard: shard)
        case .singleFlight:
            return submitSingleFlight(request, token: token, later: later, shard: shard)
        case .switchLatest:
            // A request the limits refuse replaces nothing.
            var pass = LimitPass.none
            if let refused = passLimits(request.input, now: shard.now, into: &pass) { return .decided(refused) }
            cancelRunning(key: request.key, effectID: request.effectID, shard: shard)
            return runSingle(request, token: token, limits: pass, shard: shard)
        case .unrestricted:
            var pass = LimitPass.none
            if let refused = passLimits(request.input, now: shard.now, into: &pass) { return .decided(refused) }
            return runSingle(request, token: token, limits: pass, shard: shard)
        }
    }

    /// The idempotency records, for an idempotent plugin.
    @inlinable var records: StageState<IdempotencyTable<String, String, Result<Output, any Error>>>? {
        if case .idempotent(let records, _) = stage { return records }
        return nil
    }

    /// The quota of new idempotency records per key (GCRA), when the options set one.
    @inlinable var recordQuota: StageState<RateLimitTable<String>>? {
        if case .idempotent(_, let quota) = stage { return quota }
        return nil
    }
}
