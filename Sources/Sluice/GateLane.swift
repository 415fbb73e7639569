import SluiceCore

/// One plugin's state in one shard, with its types erased: what the shard asks of every plugin
/// without knowing its input and output (cancellations, timers, sweeps, statistics, drain).
///
/// Every method runs with the lock of the shard that holds the lane, except ``startTask(_:shard:)``
/// and ``flushOutbox(shard:)``, which the shard calls with its lock released.
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
    /// Calls the completions queued while the lock was held.
    func flushOutbox(shard: GateShard)
    /// The policy timer of `key` fired.
    func timerFired(key: String, shard: GateShard)
    /// Drops up to `maxEntries` examined idle entries of each table.
    func sweep(now: Instant, maxEntries: Int)
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
