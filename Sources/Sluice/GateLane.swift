import SluiceCore

/// One plugin's state in one shard, with its types erased: what the shard asks of every plugin
/// without knowing its input and output (cancellations, timers, sweeps, statistics, drain).
///
/// Every method runs with the lock of the shard that holds the lane, except ``startTask(_:shard:)``,
/// which the shard calls with its lock released.
@usableFromInline
protocol GateLane: AnyObject {
    /// Cancels what a scope entry names: an execution (`isExecution`), or a waiting request,
    /// which then leaves its execution. Returns whether an execution was cancelled by this call.
    func cancelEntry(_ token: EventToken, isExecution: Bool, reason: CancellationReason, shard: GateShard) -> Bool
    /// Whether requests must be decided on the shard's loop (the plugin decides with a shared
    /// store, whose calls are made there).
    var decidesOnLoop: Bool { get }
    /// Starts the task of an execution launched while the lock was held.
    func startTask(_ token: EventToken, shard: GateShard)
    /// Takes the completions queued so far, with their outcomes, to be called once the lock is
    /// released (called with it held: what is queued after goes to the next batch).
    func takeOutbox() -> any OutboxBatch
    /// The policy timer of `key` armed for `deadline` fired (a timer replaced since, whose body
    /// was already running on the loop, is ignored).
    func timerFired(key: String, deadline: Instant, shard: GateShard)
    /// Drops up to `maxEntries` examined idle entries of each table, and reports the metrics
    /// (``reportMetrics()``).
    func sweep(now: Instant, maxEntries: Int)
    /// Adds what the lane counted since its last report to the plugin's swift-metrics
    /// instruments: the outcomes decided, the table's evictions and summary.
    func reportMetrics()
    /// Adds `amount` to `key`'s tally and returns the new count.
    func incrementTally(key: String, by amount: Int, now: Instant) -> Int
    /// Cancels every execution that has not passed its commit point and answers its waiting
    /// requests at once (the gate's drain ran out of time); committed executions finish.
    func drain(reason: CancellationReason, shard: GateShard)
    /// The commit guard of `execution` (see ``EffectContext/commit()``): its record and fence
    /// when it may commit, which marks it committed.
    func commit(_ execution: EventToken, shard: GateShard) -> Result<EffectRecord?, CommitRefusal>
    /// The idempotency record and current fence of `execution` (see ``EffectContext/record``).
    func record(of execution: EventToken, shard: GateShard) -> EffectRecord?
    /// Results and record releases on their way to a shared store.
    var storeOperationsPending: Int { get }
    /// Keys held in the policy's table.
    var keyCount: Int { get }
    /// Keys held in the tables of the plugin's limits (shared by its lanes in every shard).
    var limitKeyCount: Int { get }
    /// Executions held or running.
    var executionCount: Int { get }
    /// Requests waiting for a result.
    var waiterCount: Int { get }
    /// What each stage of the plugin's limits in shadow mode would have refused, by stage name.
    var shadowRefusalCounts: [(stage: String, count: Int)] { get }
    /// The policy table's counters, if the policy keeps a table.
    var tableStats: KeyTableStats? { get }
}

extension GateLane {
    /// The tag a scope entry of this lane carries: the lane's index and whether the entry names
    /// an execution (shared executions live in the key's scope) or a waiting request.
    @inlinable
    static func tag(lane: Int, isExecution: Bool) -> UInt32 {
        UInt32(lane) << 1 | (isExecution ? 1 : 0)
    }
}

/// Reads a scope entry's tag back.
struct EntryTag {
    let lane: Int
    let isExecution: Bool

    init(_ tag: UInt32) {
        lane = Int(tag >> 1)
        isExecution = tag & 1 == 1
    }
}

/// Completions taken from a lane's outbox with the shard's lock held, called once it is released.
@usableFromInline
protocol OutboxBatch {
    /// Calls every completion with its outcome.
    func deliver()
}

/// The completions of one plugin's lane (see ``OutboxBatch``): one array, so that the batch
/// fits an existential's inline buffer and taking it allocates nothing.
@usableFromInline
struct LaneOutboxBatch<Output: Sendable>: OutboxBatch {
    @usableFromInline let items: [(@Sendable (GateOutcome<Output>) -> Void, GateOutcome<Output>)]

    @inlinable
    init(items: [(@Sendable (GateOutcome<Output>) -> Void, GateOutcome<Output>)]) {
        self.items = items
    }

    @inlinable
    func deliver() {
        for (completion, outcome) in items { completion(outcome) }
    }
}
