import SluiceCore
import SluiceLibevent

/// The gate for the keys one shard owns: every plugin's state for those keys (its lane), the
/// cancellation scopes of the requests waiting here, and the sweep of idle keys.
///
/// A decision runs where its caller is, under the shard's lock: a libevent callback on any loop,
/// a task on the global pool, a framework's thread. The shard's loop drives its timers, and the
/// tasks of effects resume on it. Nothing the shard does for a decision leaves its lock while
/// held: an effect's task is started, and a completion called, only once the lock is released
/// (the shard queues them as actions and carries them out as it leaves its outermost critical
/// section), so that code of a plugin or of a front never runs under a shard's lock and can
/// enter any shard again. It is not an actor because entering an actor synchronously from a
/// callback (`assumeIsolated`) allocates twice per call, and a decision here must allocate
/// nothing.
@usableFromInline
final class GateShard: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is read and written with `lock` held (the
    // stored properties the hot path touches skip the dynamic exclusivity checks with
    // `@exclusivity(unchecked)`: the lock orders every access, and no access overlaps another).

    /// The loop that drives this shard's timers and runs its effects' tasks.
    @usableFromInline let loop: SluiceLoop
    /// Where `now` and timers come from.
    @usableFromInline let clock: any GateClock
    /// The shard's position in the gate.
    @usableFromInline let index: Int
    /// Held for every access to the shard's state (recursive: see ``ShardLock``).
    @usableFromInline let lock = ShardLock()

    let options: GateOptions
    let counters: GateCounters
    @usableFromInline let lanes: [any GateLane]
    /// Whether each lane decides on the loop only (``GateLane/decidesOnLoop``), read once.
    @usableFromInline let decidesOnLoop: [Bool]
    var tree = ScopeTree<String, EffectID>()
    /// The local node of each gate scope that has requests here, and back.
    private var localScopes: [UInt64: ScopeID] = [:]
    private var gateScopes: [ScopeID: UInt64] = [:]
    @usableFromInline @exclusivity(unchecked) var nextToken: UInt64 = 0
    /// How deep the current thread is in the shard's critical sections.
    @usableFromInline @exclusivity(unchecked) var depth = 0
    /// Actions to carry out once the lock is released: effects' tasks to start (lane and
    /// execution), tasks to cancel, and lanes with completions to call.
    @usableFromInline @exclusivity(unchecked) var launches: [(lane: Int, token: EventToken)] = []
    @usableFromInline @exclusivity(unchecked) var cancellations: [Task<Void, Never>] = []
    @usableFromInline @exclusivity(unchecked) var lanesToFlush: [Int] = []
    /// The latest instant a decision read: `now` never goes back, whichever thread reads it.
    @usableFromInline @exclusivity(unchecked) var latest: Instant
    var sweepTimer: (any GateTimer)?
    /// Set once the gate drains: a store's late answer starts no new execution.
    @usableFromInline @exclusivity(unchecked) var isDraining = false
    var drainSignal: DrainSignal?

    init(
        loop: SluiceLoop, clock: any GateClock, index: Int, plugins: [RegisteredPlugin], epochWatches: [StoreEpochWatch],
        limits: [PluginLimits], shardCount: Int, options: GateOptions, counters: GateCounters
    ) throws(SluiceError) {
        self.loop = loop
        self.clock = clock
        self.index = index
        self.options = options
        self.counters = counters
        self.latest = Instant(nanoseconds: Int64.min)
        var lanes: [any GateLane] = []
        for (index, plugin) in plugins.enumerated() {
            lanes.append(try plugin.makeLane(shardCount, epochWatches[index], limits[index]))
        }
        self.lanes = lanes
        self.decidesOnLoop = lanes.map(\.decidesOnLoop)
    }

    // MARK: - Requests

    /// A fresh token (every request, execution and scope entry of this shard gets one).
    @inlinable
    func makeToken() -> EventToken {
        nextToken &+= 1
        return EventToken(nextToken)
    }

    /// The lane of plugin `index`, typed.
    @inlinable
    func lane<Plugin: GatePlugin>(_ index: Int, as plugin: Plugin.Type) -> PluginLane<Plugin>? {
        guard lanes.indices.contains(index) else { return nil }
        // The registry gave index `index` to a `Plugin`, and the gate checked the handle comes
        // from that registry: the lane at `index` is this plugin's. Checked in debug builds.
        assert(lanes[index] is PluginLane<Plugin>)
        return unsafeDowncast(lanes[index], to: PluginLane<Plugin>.self)
    }

    /// Whether a request of plugin `index` may be decided on this thread: always, unless the
    /// plugin decides with a shared store, whose calls are made on the shard's loop.
    @inlinable
    func decidesHere(lane index: Int) -> Bool {
        guard decidesOnLoop.indices.contains(index) else { return true }
        return !decidesOnLoop[index] || loop.inEventLoop
    }

    /// Decides about `request` on this thread (see ``Gate/submitNow(_:later:)``): the outcome
    /// when it is known before this returns (an effect that ends without suspending included),
    /// else `nil`, `later`'s completion installed; and the token the request waits under.
    ///
    /// The lane decides under the lock and returns what to carry out. An execution it started
    /// is started here once the lock is released, when this is the outermost critical section
    /// (after what else the decision queued, if anything); then one more critical section
    /// gives the execution its task and takes the outcome of an effect that has ended already,
    /// or installs the completion. In a nested critical section its start is queued with the
    /// shard's other actions and the completion installed at once.
    @inlinable
    func submit<Plugin: GatePlugin>(
        _ request: GateRequest<Plugin>, later: () -> @Sendable (GateOutcome<Plugin.Output>) -> Void
    ) -> (outcome: GateOutcome<Plugin.Output>?, token: EventToken) {
        guard let lane = lane(request.plugin.index, as: Plugin.self) else { return (.busy, EventToken(0)) }
        // The key's slot in the policy's table loads while the lock is taken and the request
        // checked: at a million keys it is a miss from memory.
        let keyHash = lane.prefetch(key: request.key)
        lock.lock()
        depth &+= 1
        // Checked under the lock: a request either counts in the drain or is refused.
        if isDraining {
            leave(favouring: lane)
            return (.shuttingDown, EventToken(0))
        }
        let outcome: GateOutcome<Plugin.Output>?
        let token: EventToken
        switch lane.submit(request, keyHash: keyHash, later: later, shard: self) {
        case .decided(let decided):
            // Counted and returned as it is: unwrapping an optional copy of it would copy the
            // outcome again, and destroy that copy, through its type's value witnesses.
            lane.decisions.count(decided)
            leave(favouring: lane)
            return (decided, EventToken(0))
        case .waiting(let waiting):
            leave(favouring: lane)
            return (nil, waiting)
        case .start(let start) where depth == 1:
            if !hasActions, let effect = lane.effectStart(of: start.execution) {
                depth &-= 1
                lock.unlock()
                // The effect runs on this thread until it first suspends (from the loop).
                let task = lane.makeTask(effect, shard: self)
                lock.lock()
                depth &+= 1
                let cancel = lane.attach(task, to: start.execution, shard: self)
                outcome = lane.installCompletion(start.leader, later: later)
                lane.count(outcome)
                leave(favouring: lane)
                if cancel { task.cancel() }
            } else {
                // What the decision queued goes first (cancelling the execution a switch-latest
                // key replaced, answering a superseded one), and may cancel this one: its start
                // reads it again under the lock, as a queued start does.
                leave(favouring: lane)
                lane.startTask(start.execution, shard: self)
                lock.lock()
                depth &+= 1
                outcome = lane.installCompletion(start.leader, later: later)
                lane.count(outcome)
                leave(favouring: lane)
            }
            token = start.leader
        case .start(let start):
            outcome = lane.carryOut(.start(start), later: later, shard: self)
            lane.count(outcome)
            leave(favouring: lane)
            token = start.leader
        }
        return (outcome, token)
    }

    /// An effect's task ended (on any thread; its continuations run on the loop).
    @inlinable
    func effectEnded<Plugin: GatePlugin>(
        lane index: Int, execution: EventToken, plugin: Plugin.Type, result: Result<Plugin.Output, any Error>
    ) {
        withLock { lane(index, as: Plugin.self)?.effectEnded(execution, result: result, shard: self) }
    }

    /// Runs `body` with the lock held and plugin `index`'s lane, if it has one.
    @inlinable
    func withLane<Plugin: GatePlugin, Result>(
        _ index: Int, as plugin: Plugin.Type, _ body: (PluginLane<Plugin>) -> Result
    ) -> Result? {
        withLock { lane(index, as: Plugin.self).map(body) }
    }

    /// The commit guard of execution `execution` of plugin `lane` (see
    /// ``EffectContext/commit()``): its record and fence when it may commit, which marks it
    /// committed.
    @usableFromInline
    func commit(lane index: Int, execution: EventToken) -> Result<EffectRecord?, CommitRefusal> {
        guard lanes.indices.contains(index) else {
            return .failure(CommitRefusal(code: .notRunning, message: "the effect's plugin is not in this gate", value: "\(index)"))
        }
        return withLock { lanes[index].commit(execution, shard: self) }
    }

    /// The idempotency record and current fence of execution `execution` of plugin `lane`.
    @usableFromInline
    func record(lane index: Int, execution: EventToken) -> EffectRecord? {
        guard lanes.indices.contains(index) else { return nil }
        return withLock { lanes[index].record(of: execution, shard: self) }
    }

    /// A policy timer of plugin `lane` fired for `key`.
    @usableFromInline
    func timerFired(lane index: Int, key: String, deadline: Instant) {
        guard lanes.indices.contains(index) else { return }
        withLock { lanes[index].timerFired(key: key, deadline: deadline, shard: self) }
    }

    /// Adds to a key's tally (see ``EffectContext/incrementTally(by:)``).
    @usableFromInline
    func incrementTally(lane index: Int, key: String, by amount: Int) -> Int {
        guard lanes.indices.contains(index) else { return 0 }
        return withLock { lanes[index].incrementTally(key: key, by: amount, now: now) }
    }

    // MARK: - Scopes

    /// Registers a scope entry in `scope` (the root when `nil`). Returns `false` when the scope
    /// has been closed.
    @usableFromInline
    func registerEntry(_ token: EventToken, id: EffectID, key: String, scope: GateScope?, tag: UInt32) -> Bool {
        guard let local = scope.map({ localScope(for: $0) }) ?? tree.root else { return false }
        do {
            try tree.register(EffectToken(rawValue: token.rawValue), id: id, key: key, in: local, tag: tag)
            return true
        } catch {
            return false
        }
    }

    /// The scope entry ended.
    @usableFromInline
    func finishEntry(_ token: EventToken) {
        tree.finished(EffectToken(rawValue: token.rawValue), removedScope: forgetScope)
    }

    /// The local node of a gate scope, opened (with its ancestors) on first use; `nil` once the
    /// scope is closed.
    private func localScope(for scope: GateScope) -> ScopeID? {
        guard let parent = scope.parent else { return tree.root }
        if let local = localScopes[scope.id] { return local }
        // Mark first: a scope closed from now on includes this shard in its broadcast.
        guard scope.markHeld(byShard: index), let parentLocal = localScope(for: parent),
            let local = try? tree.openScope(in: parentLocal, removeWhenEmpty: true)
        else { return nil }
        localScopes[scope.id] = local
        gateScopes[local] = scope.id
        return local
    }

    private func forgetScope(_ local: ScopeID) {
        if let id = gateScopes.removeValue(forKey: local) { localScopes[id] = nil }
    }

    /// A gate scope closed: every request waiting in it or below it here leaves.
    func closeScope(_ id: UInt64) {
        withLock {
            guard let local = localScopes[id] else { return }
            let tokens = tree.close(local, removedScope: forgetScope)
            _ = cancelEntries(tokens, reason: .scopeClosed)
        }
    }

    /// Cancels the entries under `id` in a gate scope and below it (the root when `scope` is
    /// `nil`). Returns how many executions that cancelled.
    func cancel(id: EffectID, inScope scope: UInt64?) -> Int {
        withLock { cancelLocked(id: id, inScope: scope) }
    }

    private func cancelLocked(id: EffectID, inScope scope: UInt64?) -> Int {
        let local: ScopeID
        if let scope {
            guard let found = localScopes[scope] else { return 0 }
            local = found
        } else {
            local = tree.root
        }
        return cancelEntries(tree.cancel(id: id, in: local), reason: .requested)
    }

    /// Cancels the entries of `key` with this ID (every ID when `nil`). Returns how many
    /// executions that cancelled.
    func cancel(id: EffectID?, key: String) -> Int {
        withLock { cancelEntries(tree.cancel(id: id, key: key), reason: .requested) }
    }

    /// A caller stopped waiting (its task was cancelled).
    func leave(waiter token: EventToken, lane index: Int, reason: CancellationReason) {
        guard lanes.indices.contains(index) else { return }
        withLock { _ = lanes[index].cancelEntry(token, isExecution: false, reason: reason, shard: self) }
    }

    /// Acts on cancelled entries: executions first, then waiting requests (a waiter of an
    /// execution cancelled here hears how that execution ends).
    private func cancelEntries(_ tokens: [EffectToken], reason: CancellationReason) -> Int {
        var cancelled = 0
        for pass in [true, false] {
            for token in tokens {
                guard let raw = tree.tag(of: token) else { continue }
                let tag = EntryTag(raw)
                guard tag.isExecution == pass, lanes.indices.contains(tag.lane) else { continue }
                if lanes[tag.lane].cancelEntry(
                    EventToken(token.rawValue), isExecution: tag.isExecution, reason: reason, shard: self)
                {
                    cancelled += 1
                }
            }
        }
        return cancelled
    }

    /// One more execution was cancelled.
    @usableFromInline
    func countCancelled() {
        counters.cancelled.increment()
    }
}
