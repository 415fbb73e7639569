import Logging
import ServiceLifecycle
import SluiceCore
import SluiceLibevent
import Synchronization

/// The one entry point of Sluice: embedders and every front submit typed requests here and get
/// typed ``GateOutcome``s back.
///
/// A gate runs over a `SluiceLoopGroup` with one shard per loop; it opens no socket of its
/// own. A key belongs to one shard (chosen by a stable hash of the key), so every request for a
/// key is decided under that shard's lock, in order, on whichever thread asks; the shard's loop
/// drives the key's timers and runs its effects. Its sweeps of idle keys start with it.
///
/// Two ways to call, from anywhere:
/// - ``submit(_:)`` (`async`) from any task: decided on the calling thread; an outcome known at
///   once returns without suspending.
/// - ``submitNow(_:later:)`` from synchronous code (libevent callbacks, fronts, framework
///   handlers): no hop and no task; an outcome known at once is returned, allocation-free on
///   the hot paths.
///
/// ```swift
/// var plugins = PluginRegistry()
/// let tap = try plugins.register(ButtonTapPlugin())
/// let gate = try Gate(group: group, plugins: plugins)
/// switch await gate.submit(tap, "user42") {
/// case .ran(let count, _): print("tap \(count)")
/// case .throttled(let retryAfter): print("again in \(retryAfter)")
/// default: break
/// }
/// await gate.shutdown()
/// ```
///
/// As a swift-service-lifecycle `Service`, ``run()`` waits for a graceful shutdown and then
/// drains (see ``shutdown(gracePeriod:)``); put it first in a `ServiceGroup` so that fronts stop
/// accepting before it drains.
public final class Gate: Service, Sendable {
    /// The loops.
    public let group: SluiceLoopGroup
    /// The options.
    public let options: GateOptions
    /// The root cancellation scope (the server).
    public let rootScope: GateScope
    @usableFromInline let shards: [GateShard]
    let plugins: [RegisteredPlugin]
    @usableFromInline let registry: RegistryIdentity
    /// How many plugins the gate runs (a handle's index must be below it).
    @usableFromInline let pluginCount: Int
    let counters = GateCounters()
    @usableFromInline let lifecycle = Atomic<UInt8>(Lifecycle.running)
    let shutdownBegun = Atomic<Bool>(false)
    private let nextScopeID = Atomic<UInt64>(1)
    let logger: Logger

    @usableFromInline
    enum Lifecycle {
        @usableFromInline static let running: UInt8 = 0
        @usableFromInline static let draining: UInt8 = 1
        @usableFromInline static let stopped: UInt8 = 2
    }

    /// Creates a gate over `group` running `plugins`, and starts its sweeps.
    ///
    /// - Parameters:
    ///   - group: the loops the gate runs on, one shard per loop.
    ///   - plugins: the plugins it runs, with their budgets.
    ///   - options: sweeps and the shutdown grace period.
    ///   - logger: where the gate logs.
    ///   - clock: makes each shard's clock from its loop (tests pass a manual one).
    /// - Throws: `SluiceError` for bad options or a plugin budget too small for its table.
    public init(
        group: SluiceLoopGroup,
        plugins: PluginRegistry,
        options: GateOptions = GateOptions(),
        logger: Logger = Logger(label: "sluice.gate"),
        clock: @Sendable (SluiceLoop) -> any GateClock = { LoopGateClock(loop: $0) }
    ) throws(SluiceError) {
        try options.validate()
        self.group = group
        self.options = options
        self.plugins = plugins.plugins
        self.registry = plugins.identity
        self.pluginCount = plugins.plugins.count
        plugins.identity.markInUse()
        self.logger = logger
        self.rootScope = GateScope(id: 0, parent: nil)
        let counters = self.counters
        let epochWatches = plugins.plugins.map { StoreEpochWatch(plugin: $0.name, logger: logger) }
        let shardCount = group.loops.count
        var shards: [GateShard] = []
        // Each stage of a plugin's limits keeps its keys in one table for all the shards, an
        // eighth the size of the plugin's budget.
        let limits = try plugins.plugins.map { (plugin) throws(SluiceError) -> PluginLimits in
            try PluginLimits(stages: plugin.limitStages, budget: plugin.budget.eighth, shards: shardCount)
        }
        for (index, loop) in group.loops.enumerated() {
            shards.append(
                try GateShard(
                    loop: loop, clock: clock(loop), index: index, plugins: plugins.plugins, epochWatches: epochWatches,
                    limits: limits, shardCount: shardCount, options: options, counters: counters))
        }
        self.shards = shards
        for shard in shards {
            shard.loop.executeIfRunning { shard.startSweeping() }
        }
    }

    // MARK: - Keys

    /// The index of the loop (in ``group``) that owns `key`: a stable hash of its bytes, the
    /// same in every process.
    @inlinable
    public func shardIndex(forKey key: String) -> Int {
        // One shard owns every key: no hash.
        guard shards.count > 1 else { return 0 }
        return Int(StableHash.of(key) % UInt64(shards.count))
    }

    /// The loop that owns `key`.
    public func loop(forKey key: String) -> SluiceLoop {
        shards[shardIndex(forKey: key)].loop
    }

    /// Whether the gate takes new requests (it stops when a shutdown begins).
    @inlinable
    public var isAcceptingRequests: Bool {
        lifecycle.load(ordering: .acquiring) == Lifecycle.running
    }

    // MARK: - Requests

    /// Prepares a request: computes its key and the shard that owns it.
    ///
    /// - Parameters:
    ///   - plugin: the registered plugin that decides and runs it.
    ///   - input: the plugin's input.
    ///   - id: the effect ID it runs under; the plugin's name when `nil`.
    ///   - scope: the scope its caller waits in; the root when `nil`.
    /// - Precondition: `plugin` was registered in the registry this gate was made from, before
    ///   the gate was made.
    @inlinable
    public func request<Plugin: GatePlugin>(
        _ plugin: PluginHandle<Plugin>, _ input: Plugin.Input, id: EffectID? = nil, in scope: GateScope? = nil
    ) -> GateRequest<Plugin> {
        precondition(plugin.registry === registry, "the plugin handle comes from another registry than this gate's")
        precondition(
            plugin.index < pluginCount,
            "the plugin '\(plugin.name)' was registered after this gate was made: register every plugin before making the gate")
        let key = plugin.plugin.key(for: input)
        let shard = shardIndex(forKey: key)
        return GateRequest(
            plugin: plugin, input: input, key: key, effectID: id, scope: scope ?? rootScope, shardIndex: shard)
    }

    /// Decides about `request` without suspending, on the calling thread (any thread: a
    /// libevent callback on any loop, a framework's event loop, a plain thread), under the lock
    /// of the shard that owns its key. A plugin that decides with a shared store is decided on
    /// its key's loop instead: from elsewhere this hops there and the outcome comes later.
    ///
    /// - Parameter request: what to decide, from ``request(_:_:id:in:)``.
    /// - Parameter later: called at most once, only when the outcome is not known before this
    ///   returns, to make the completion that will receive it; called under the shard's lock, so
    ///   it must only make the completion, not call into the gate. Nothing is allocated for an
    ///   outcome known at once. The completion is called on the thread that ends the request
    ///   (the key's loop, for an effect's task; the caller of a request that supersedes or
    ///   cancels this one), never while a shard's lock is held.
    /// - Returns: the outcome when it is known at once (throttled, limited, replayed, mismatch,
    ///   busy, an effect that finished without suspending, …), or `nil` when it will come
    ///   through the completion.
    @inlinable
    public func submitNow<Plugin: GatePlugin>(
        _ request: GateRequest<Plugin>,
        later: @Sendable () -> @Sendable (GateOutcome<Plugin.Output>) -> Void
    ) -> GateOutcome<Plugin.Output>? {
        guard isAcceptingRequests else { return .shuttingDown }
        let shard = shards[request.shardIndex]
        if shard.decidesHere(lane: request.plugin.index) {
            return shard.submit(request, later: later).outcome
        }
        return submitOnLoop(request, shard: shard, later: later)
    }

    /// ``submitNow(_:later:)`` for a plugin that decides on its key's loop, called elsewhere: a
    /// hop there. Out of line, because the closure that hops needs its own copy of the request,
    /// and inlined into ``submitNow(_:later:)`` that copy (a retain of every reference the
    /// request holds, and its release) was made before the branch, for every request.
    @usableFromInline @inline(never)
    func submitOnLoop<Plugin: GatePlugin>(
        _ request: GateRequest<Plugin>, shard: GateShard,
        later: @Sendable () -> @Sendable (GateOutcome<Plugin.Output>) -> Void
    ) -> GateOutcome<Plugin.Output>? {
        let completion = later()
        let accepted = shard.loop.executeIfRunning {
            guard self.isAcceptingRequests else { return completion(.shuttingDown) }
            if let outcome = shard.submit(request, later: { completion }).outcome { completion(outcome) }
        }
        return accepted ? nil : .shuttingDown
    }

    /// Submits `request` from any task and waits for its outcome. The decision is made on the
    /// calling thread (see ``submitNow(_:later:)``): an outcome known at once returns without
    /// suspending and without allocating. If the awaiting task is cancelled, the request leaves
    /// at once with ``CancellationReason/callerCancelled`` (an idempotent execution runs on and
    /// stores its result; a shared one is cancelled only when no waiter remains).
    ///
    /// Inlinable, so that a caller's concrete plugin type reaches the lane: generic code would
    /// look the plugin's generic metadata up on every request.
    @inlinable
    public func submit<Plugin: GatePlugin>(_ request: GateRequest<Plugin>) async -> GateOutcome<Plugin.Output> {
        guard isAcceptingRequests else { return .shuttingDown }
        let shard = shards[request.shardIndex]
        guard shard.decidesHere(lane: request.plugin.index) else { return await submitOnLoop(request) }
        var waiter: OutcomeWaiter<Plugin.Output>?
        let decided = shard.submit(request) {
            let made = OutcomeWaiter<Plugin.Output>()
            waiter = made
            return { made.resolve($0) }
        }
        if let outcome = decided.outcome { return outcome }
        guard let waiter else { return .busy }
        waiter.registered(shard: shard, lane: request.plugin.index, token: decided.token)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { waiter.install($0) }
        } onCancel: {
            waiter.leave(reason: .callerCancelled)
        }
    }

    /// ``submit(_:)`` for a plugin that decides on its key's loop: one hop there and back.
    @usableFromInline
    func submitOnLoop<Plugin: GatePlugin>(_ request: GateRequest<Plugin>) async -> GateOutcome<Plugin.Output> {
        let waiter = OutcomeWaiter<Plugin.Output>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<GateOutcome<Plugin.Output>, Never>) in
                waiter.install(continuation)
                self.enqueue(request, for: waiter)
            }
        } onCancel: {
            waiter.leave(reason: .callerCancelled)
        }
    }

    /// Submits a request for `input` (see ``request(_:_:id:in:)``) and waits for its outcome.
    @inlinable
    public func submit<Plugin: GatePlugin>(
        _ plugin: PluginHandle<Plugin>, _ input: Plugin.Input, id: EffectID? = nil, in scope: GateScope? = nil
    ) async -> GateOutcome<Plugin.Output> {
        await submit(request(plugin, input, id: id, in: scope))
    }

    /// Submits `request` and returns once the gate has registered it (so a cancel issued after
    /// this returns reaches it); await ``GateTicket/outcome`` for the result.
    public func start<Plugin: GatePlugin>(_ request: GateRequest<Plugin>) async -> GateTicket<Plugin.Output> {
        let waiter = OutcomeWaiter<Plugin.Output>()
        guard isAcceptingRequests else {
            waiter.resolve(.shuttingDown)
            return GateTicket(waiter: waiter)
        }
        let shard = shards[request.shardIndex]
        if shard.decidesHere(lane: request.plugin.index) {
            decide(request, for: waiter)
        } else {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let accepted = shard.loop.executeIfRunning {
                    self.decide(request, for: waiter)
                    continuation.resume()
                }
                if !accepted {
                    waiter.resolve(.shuttingDown)
                    continuation.resume()
                }
            }
        }
        return GateTicket(waiter: waiter)
    }

    /// Starts a request for `input` (see ``request(_:_:id:in:)`` and ``start(_:)``).
    public func start<Plugin: GatePlugin>(
        _ plugin: PluginHandle<Plugin>, _ input: Plugin.Input, id: EffectID? = nil, in scope: GateScope? = nil
    ) async -> GateTicket<Plugin.Output> {
        await start(request(plugin, input, id: id, in: scope))
    }

    private func enqueue<Plugin: GatePlugin>(_ request: GateRequest<Plugin>, for waiter: OutcomeWaiter<Plugin.Output>) {
        let loop = shards[request.shardIndex].loop
        if loop.inEventLoop {
            decide(request, for: waiter)
        } else if !loop.executeIfRunning({ self.decide(request, for: waiter) }) {
            waiter.resolve(.shuttingDown)
        }
    }

    /// Decides about `request` here, for `waiter`.
    private func decide<Plugin: GatePlugin>(_ request: GateRequest<Plugin>, for waiter: OutcomeWaiter<Plugin.Output>) {
        guard isAcceptingRequests else {
            waiter.resolve(.shuttingDown)
            return
        }
        let shard = shards[request.shardIndex]
        let decided = shard.submit(request, later: { { waiter.resolve($0) } })
        if let outcome = decided.outcome {
            waiter.resolve(outcome)
        } else {
            waiter.registered(shard: shard, lane: request.plugin.index, token: decided.token)
        }
    }

    // MARK: - Scopes and cancellation

    /// Opens a scope below `parent` (the root when `nil`): a connection, a session, a screen.
    public func openScope(in parent: GateScope? = nil) -> GateScope {
        GateScope(id: nextScopeID.wrappingAdd(1, ordering: .relaxed).newValue, parent: parent ?? rootScope)
    }

    /// Closes `scope` and every scope below it: every request waiting in them leaves, on every
    /// loop (see ``CancellationReason/scopeClosed``), and later requests in them are cancelled at
    /// once. Shards on the calling loop act before this returns; the others right after. The
    /// root scope closes only with ``shutdown(gracePeriod:)``.
    public func close(_ scope: GateScope) {
        guard !scope.isRoot else { return }
        let held = scope.markClosed()
        for shard in shards where GateScope.bits(held, include: shard.index) {
            let id = scope.id
            if shard.loop.inEventLoop {
                shard.closeScope(id)
            } else {
                shard.loop.executeIfRunning { shard.closeScope(id) }
            }
        }
    }

    /// Cancels every request and execution under `id` in `scope` and below it (every scope when
    /// it is the root), pending or running. Returns how many executions that cancelled.
    @discardableResult
    public func cancel(id: EffectID, in scope: GateScope) async -> Int {
        let held = scope.isRoot ? UInt64.max : scope.heldBy
        let target: UInt64? = scope.isRoot ? nil : scope.id
        var cancelled = 0
        for shard in shards where GateScope.bits(held, include: shard.index) {
            cancelled += await perform(on: shard) { $0.cancel(id: id, inScope: target) } ?? 0
        }
        return cancelled
    }

    /// ``cancel(id:in:)`` with any `Hashable & Sendable` ID.
    @discardableResult
    public func cancel(id: some Hashable & Sendable, in scope: GateScope) async -> Int {
        await cancel(id: EffectID(id), in: scope)
    }

    /// Cancels every request and execution under `id`, in every scope (TCA's `.cancel(id:)`).
    /// Returns how many executions that cancelled.
    @discardableResult
    public func cancel(id: some Hashable & Sendable) async -> Int {
        await cancel(id: EffectID(id), in: rootScope)
    }

    /// Cancels the requests and executions of `key` under `id` (every ID when `nil`), in every
    /// scope. Returns how many executions that cancelled.
    @discardableResult
    public func cancel(id: EffectID?, key: String) async -> Int {
        await perform(on: shards[shardIndex(forKey: key)]) { $0.cancel(id: id, key: key) } ?? 0
    }

    /// ``cancel(id:key:)`` without suspending, on the calling thread (any thread).
    @discardableResult
    public func cancelNow(id: EffectID?, key: String) -> Int {
        shards[shardIndex(forKey: key)].cancel(id: id, key: key)
    }
}
