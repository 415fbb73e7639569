import SluiceCore
import SluiceLibevent

/// The gate for the keys one loop owns: every plugin's state for those keys (its lane), the
/// cancellation scopes of the requests waiting here, and the sweep of idle keys.
///
/// Confined to its loop, as a SwiftNIO channel's state is confined to its event loop: a libevent
/// callback on that loop enters it synchronously and decides without a thread hop, an effect's
/// task (which prefers the loop as its executor) reports back on the loop thread, and callers
/// elsewhere hop there first (`loop.execute`). It is not an actor because entering an actor
/// synchronously from a callback (`assumeIsolated`) allocates twice per call, and a decision
/// here must allocate nothing.
@usableFromInline
final class GateShard: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is read and written on `loop`'s thread only;
    // the entry points called from elsewhere hop there first, and the methods assert it in
    // debug builds (the public entry points check it in release builds too). The properties
    // the hot path touches skip the dynamic exclusivity checks (`@exclusivity(unchecked)`):
    // one thread, no overlapping access.

    /// The loop that owns this shard's keys.
    @usableFromInline let loop: EventLoop
    /// Where `now` and timers come from.
    @usableFromInline let clock: any GateClock
    /// The shard's position in the gate.
    @usableFromInline let index: Int

    private let options: GateOptions
    private let counters: GateCounters
    @usableFromInline @exclusivity(unchecked) var lanes: [any GateLane] = []
    private var tree = ScopeTree<String, EffectID>()
    /// The local node of each gate scope that has requests here, and back.
    private var localScopes: [UInt64: ScopeID] = [:]
    private var gateScopes: [ScopeID: UInt64] = [:]
    @usableFromInline @exclusivity(unchecked) var nextToken: UInt64 = 0
    /// The waiter token of the request the last `submit` decided about.
    @usableFromInline @exclusivity(unchecked) var lastSubmittedToken = EventToken(0)
    private var sweepTimer: (any GateTimer)?
    /// Set once the gate drains: a store's late answer starts no new execution.
    @usableFromInline var isDraining = false
    private var drainSignal: DrainSignal?

    init(
        loop: EventLoop, clock: any GateClock, index: Int, plugins: [RegisteredPlugin], epochWatches: [StoreEpochWatch],
        shardCount: Int, options: GateOptions, counters: GateCounters
    ) throws(SluiceError) {
        self.loop = loop
        self.clock = clock
        self.index = index
        self.options = options
        self.counters = counters
        var lanes: [any GateLane] = []
        for (plugin, epochWatch) in zip(plugins, epochWatches) {
            lanes.append(try plugin.makeLane(shardCount, epochWatch))
        }
        self.lanes = lanes
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

    /// Decides about `request` (see ``Gate/submitNow(_:later:)``).
    @inlinable
    func submit<Plugin: GatePlugin>(
        _ request: GateRequest<Plugin>, later: @Sendable () -> @Sendable (GateOutcome<Plugin.Output>) -> Void
    ) -> GateOutcome<Plugin.Output>? {
        loop.assertInEventLoop()
        guard let lane = lane(request.plugin.index, as: Plugin.self) else { return .busy }
        let outcome = lane.submit(request, later: later, shard: self)
        if let outcome { lane.metrics.count(outcome) }
        return outcome
    }

    /// An effect's task ended; called from the task, which runs on the loop.
    @inlinable
    func effectEnded<Plugin: GatePlugin>(
        lane index: Int, execution: EventToken, plugin: Plugin.Type, result: Result<Plugin.Output, any Error>
    ) {
        // Off the loop thread only if the task ignored its loop (it cannot, as its executor
        // preference), so this is a safety net, not a path.
        guard loop.inEventLoop else { return }
        lane(index, as: Plugin.self)?.effectEnded(execution, result: result, shard: self)
    }

    /// The commit guard of execution `execution` of plugin `lane` (see
    /// ``EffectContext/commit()``): its record and fence when it may commit, which marks it
    /// committed.
    @usableFromInline
    func commit(lane index: Int, execution: EventToken) -> Result<EffectRecord?, CommitRefusal> {
        guard lanes.indices.contains(index) else {
            return .failure(CommitRefusal(code: .notRunning, message: "the effect's plugin is not in this gate", value: "\(index)"))
        }
        return lanes[index].commit(execution, shard: self)
    }

    /// The idempotency record and current fence of execution `execution` of plugin `lane`.
    @usableFromInline
    func record(lane index: Int, execution: EventToken) -> EffectRecord? {
        guard lanes.indices.contains(index) else { return nil }
        return lanes[index].record(of: execution, shard: self)
    }

    /// A policy timer of plugin `lane` fired for `key`.
    @usableFromInline
    func timerFired(lane index: Int, key: String) {
        guard lanes.indices.contains(index) else { return }
        lanes[index].timerFired(key: key, shard: self)
    }

    /// Adds to a key's tally (see ``EffectContext/incrementTally(by:)``).
    @usableFromInline
    func incrementTally(lane index: Int, key: String, by amount: Int) -> Int {
        guard lanes.indices.contains(index) else { return 0 }
        return lanes[index].incrementTally(key: key, by: amount, now: clock.now)
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
        guard let local = localScopes[id] else { return }
        let tokens = tree.close(local, removedScope: forgetScope)
        _ = cancelEntries(tokens, reason: .scopeClosed)
    }

    /// Cancels the entries under `id` in a gate scope and below it (the root when `scope` is
    /// `nil`). Returns how many executions that cancelled.
    func cancel(id: EffectID, inScope scope: UInt64?) -> Int {
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
        cancelEntries(tree.cancel(id: id, key: key), reason: .requested)
    }

    /// A caller stopped waiting (its task was cancelled).
    func leave(waiter token: EventToken, lane index: Int, reason: CancellationReason) {
        guard lanes.indices.contains(index) else { return }
        _ = lanes[index].cancelEntry(token, isExecution: false, reason: reason, shard: self)
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

    // MARK: - Sweeping and draining

    /// Starts the periodic sweep of idle keys. Call on the loop.
    func startSweeping() {
        sweepTimer = clock.schedule(at: clock.now + options.sweepInterval) { [self] in
            self.sweep()
        }
    }

    /// Stops the periodic sweep.
    func stopSweeping() {
        sweepTimer?.cancel()
        sweepTimer = nil
    }

    private func sweep() {
        guard sweepTimer != nil else { return }
        let now = clock.now
        for lane in lanes { lane.sweep(now: now, maxEntries: options.sweepBatch) }
        startSweeping()
    }

    /// The gate began to drain: `signal` hears when this shard has no execution left.
    func beginDrain(_ signal: DrainSignal) {
        isDraining = true
        if executionCount == 0 {
            signal.shardIsIdle()
        } else {
            drainSignal = signal
        }
    }

    /// An execution ended (or was dropped).
    @usableFromInline
    func executionEnded() {
        guard let signal = drainSignal, executionCount == 0 else { return }
        drainSignal = nil
        signal.shardIsIdle()
    }

    /// The grace period is over: cancels and answers everything left, and stops sweeping.
    func finishDrain() {
        drainSignal = nil
        for lane in lanes { lane.drain(reason: .shutdown, shard: self) }
        stopSweeping()
    }

    // MARK: - Statistics

    /// Keys held in the plugins' policy tables.
    var keyCount: Int { lanes.reduce(0) { $0 + $1.keyCount } }

    /// Executions held or running.
    var executionCount: Int { lanes.reduce(0) { $0 + $1.executionCount } }

    /// Results and record releases on their way to a shared store.
    var storeOperationsPending: Int { lanes.reduce(0) { $0 + $1.storeOperationsPending } }

    /// Requests waiting for a result.
    var waiterCount: Int { lanes.reduce(0) { $0 + $1.waiterCount } }

    /// Open local scopes (the root included).
    var scopeCount: Int { tree.scopeCount }

    /// Each plugin's policy table counters, in registration order.
    var tableStats: [KeyTableStats?] { lanes.map(\.tableStats) }
}

