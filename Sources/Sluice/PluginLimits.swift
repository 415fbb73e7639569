import SluiceCore

/// A plugin's limit chain (``GatePlugin/limits``) for the whole gate: one table per stage, shared
/// by every shard. A stage keyed by something coarser than the plugin's key (a client address
/// that many accounts share) then counts the requests of every shard, exactly, whichever loop
/// owns each account.
///
/// The lanes call it with their shard's lock held. When the gate has more than one shard, a lock
/// of its own orders the shards' calls. That lock is always taken last and held only for the
/// chain's arithmetic: nothing under it calls out, waits or takes another lock. With one shard,
/// the shard's lock already orders every call, and no second lock is taken.
@usableFromInline
final class PluginLimits: @unchecked Sendable {
    // @unchecked Sendable: `chain` is read and changed only with `lock` held, or, when there is
    // no lock (one shard), with the one shard's lock held.
    @usableFromInline @exclusivity(unchecked) var chain: LimitChain<String>
    @usableFromInline let lock: ShardLock?
    /// The stages, in order (never change).
    @usableFromInline let stages: [ChainStage]
    /// Whether the chain has no stage.
    @usableFromInline let isEmpty: Bool
    /// Whether a stage limits a rate (its state is reported with outcomes).
    @usableFromInline let hasRateStages: Bool

    /// The chain of `stages`, each stage's table within `budget`. `shards` is the number of
    /// shards that call it.
    init(stages: [ChainStage], budget: MemoryBudget, shards: Int) throws(SluiceError) {
        chain = try LimitChain(stages: stages, budget: budget)
        lock = shards > 1 ? ShardLock() : nil
        self.stages = stages
        isEmpty = stages.isEmpty
        hasRateStages = chain.hasRateStages
    }

    @inlinable
    func withChain<Result>(_ body: (inout LimitChain<String>) -> Result) -> Result {
        lock?.lock()
        defer { lock?.unlock() }
        return body(&chain)
    }

    /// Decides `keys` (stage *i*'s key at *i*) for `cost` over every stage, all or nothing, into
    /// `admission`. A refused request leaves every stage as it was.
    @inlinable
    func admit(keys: [String], cost: Int, now: Instant, into admission: inout ChainAdmission) {
        withChain { $0.admit(keys: keys, cost: cost, now: now, into: &admission) }
    }

    /// Each stage's verdict for `keys` now, without changing anything: what a refused request's
    /// earlier stages report.
    @inlinable
    func peek(stages count: Int, keys: [String], now: Instant, into verdicts: inout [StageVerdict]) {
        withChain { chain in
            for stage in 0..<count { verdicts[stage] = chain.peek(stage: stage, key: keys[stage], now: now) }
        }
    }

    /// Gives back what `hold` took for `keys` and `cost`: its request will not run.
    @inlinable
    func rollBack(_ hold: ChainHold, keys: [String], cost: Int, now: Instant) {
        withChain { $0.rollBack(hold, keys: keys, cost: cost, now: now) }
    }

    /// Frees the concurrency slots `hold` took: its request's effect ended.
    @inlinable
    func release(_ hold: ChainHold, keys: [String]) {
        withChain { $0.release(hold, keys: keys) }
    }

    /// Drops idle keys.
    func sweep(now: Instant, maxEntries: Int) {
        withChain { $0.sweep(now: now, maxEntries: maxEntries) }
    }

    /// The keys the stages' tables hold.
    var keyCount: Int { withChain { $0.keyCount } }
}
