import SluiceCore
import SluiceLibevent

/// The gate for the keys one loop owns: the plugins' policy tables, the cancellation scopes and
/// the running effects. Its executor is the loop, so a libevent callback on that loop enters it
/// synchronously (`assumeIsolated`) and decides without a thread hop (DESIGN §1).
public actor GateShard {
    /// The loop that owns this shard's keys.
    public nonisolated let loop: EventLoop
    /// Where `now` and timers come from.
    public nonisolated let clock: any GateClock
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    private let plugins: [RegisteredPlugin]
    private let statistics: GateStatistics
    private var timed: [TimedPlugin?]
    private var idempotent: [IdempotentPlugin?]
    private var scopes = ScopeBook()
    private var effects: [EffectToken: EffectRecord] = [:]
    private var nextEventToken: UInt64 = 0
    private var sweepTimer: (any GateTimer)?

    /// How many entries of each table one sweep examines.
    static let sweepBatch = 256
    /// How often the shard sweeps idle keys.
    static let sweepInterval: Duration = .milliseconds(250)

    init(loop: EventLoop, clock: any GateClock, plugins: [RegisteredPlugin], statistics: GateStatistics, shardCount: Int) throws(SluiceError) {
        self.loop = loop
        self.clock = clock
        self.plugins = plugins
        self.statistics = statistics
        var timed: [TimedPlugin?] = []
        var idempotent: [IdempotentPlugin?] = []
        for plugin in plugins {
            let budget = plugin.budget.divided(by: shardCount)
            switch plugin.policy {
            case .throttle(let options):
                timed.append(TimedPlugin(table: .init(throttle: try ThrottleTable<String>(options: options, budget: budget)), cancelInFlight: false))
                idempotent.append(nil)
            case .debounce(let options, let cancelInFlight):
                timed.append(TimedPlugin(table: .init(debounce: try DebounceTable<String>(options: options, budget: budget)), cancelInFlight: cancelInFlight))
                idempotent.append(nil)
            case .idempotent(let options):
                timed.append(nil)
                idempotent.append(IdempotentPlugin(table: try IdempotencyTable(options: options, budget: budget)))
            case .unrestricted:
                timed.append(nil)
                idempotent.append(nil)
            }
        }
        self.timed = timed
        self.idempotent = idempotent
    }

    // MARK: - Requests

    /// Decides about one request and acts on the decision. Call on the shard's loop.
    func submit(_ request: GateRequest) {
        nextEventToken &+= 1
        let token = EventToken(nextEventToken)
        let index = request.plugin.index
        switch request.plugin.policy {
        case .throttle, .debounce:
            submitTimed(request, token: token, index: index)
        case .idempotent:
            submitIdempotent(request, token: token, index: index)
        case .unrestricted:
            if let effect = register(request, token: token) {
                launch(effect)
            }
        }
    }

    private func submitTimed(_ request: GateRequest, token: EventToken, index: Int) {
        let key = request.prepared.key
        let now = clock.now
        // libevent runs socket callbacks before the timers of the same iteration: deliver a
        // timer that is already due first, so the event sees the state it would have after it.
        if let timer = timed[index]!.timers[key], timer.deadline <= now {
            timer.cancel()
            timerFired(key: key, index: index)
        }
        let keyed = timed[index]!.table.event(token, key: key, now: now)
        if let evicted = keyed.evictedPending {
            // Another key's held request lost its state to make room: it will never run.
            dropHeld(evicted, index: index, reply: "CANCELLED")
        }
        switch keyed.decision {
        case .run:
            if timed[index]!.cancelInFlight { cancelRunning(key: key, index: index) }
            if let effect = register(request, token: token) {
                launch(effect)
            }
        case .drop(let retryAfter):
            request.requester.reply("THROTTLED retry-after-ms=\(retryAfter.wholeMillisecondsRoundedUp)")
        case .hold(let schedule, let superseded):
            if let superseded {
                dropHeld(superseded, index: index, reply: "SUPERSEDED")
            }
            if timed[index]!.cancelInFlight { cancelRunning(key: key, index: index) }
            if let effect = register(request, token: token) {
                timed[index]!.held[token] = effect
            }
            if let schedule {
                armTimer(key: key, index: index, at: schedule)
            }
        }
    }

    private func submitIdempotent(_ request: GateRequest, token: EventToken, index: Int) {
        let identity = request.prepared.identity!
        let decision: IdempotencyDecision<PluginReply>
        do {
            decision = try idempotent[index]!.table.begin(
                key: identity.record, fingerprint: identity.fingerprint, token: token, now: clock.now)
        } catch {
            request.requester.reply("ERR busy")
            return
        }
        switch decision {
        case .execute:
            if let effect = register(request, token: token) {
                launch(effect)
            } else {
                idempotent[index]!.table.cancel(key: identity.record, owner: token)
            }
        case .join(let owner):
            idempotent[index]!.joiners[owner, default: []].append(request.requester)
        case .conflict:
            request.requester.reply("ERR conflict")
        case .replay(let stored):
            request.requester.reply(stored.text + " replayed=true")
        case .mismatch:
            request.requester.reply("MISMATCH")
        }
    }

    // MARK: - Timers

    private func armTimer(key: String, index: Int, at deadline: Instant) {
        if let existing = timed[index]!.timers[key] {
            // The earlier timer fires first and the policy reschedules it to the later instant.
            if existing.deadline <= deadline { return }
            existing.cancel()
        }
        timed[index]!.timers[key] = clock.schedule(at: deadline) { [self] in
            self.assumeIsolated { $0.timerFired(key: key, index: index) }
        }
    }

    private func timerFired(key: String, index: Int) {
        timed[index]!.timers[key] = nil
        switch timed[index]!.table.fire(key: key, now: clock.now) {
        case .run(let token):
            guard let effect = timed[index]!.held.removeValue(forKey: token) else { return }
            if timed[index]!.cancelInFlight { cancelRunning(key: key, index: index) }
            launch(effect)
        case .reschedule(let deadline):
            armTimer(key: key, index: index, at: deadline)
        case .none:
            break
        }
    }

    // MARK: - Effects

    /// Registers a pending effect for the request in its scope. If the scope cannot take it
    /// (the tree refused: its scope was closed), the request replies `CANCELLED` and this
    /// returns `nil`.
    private func register(_ request: GateRequest, token: EventToken) -> EffectToken? {
        guard let registration = scopes.register(
            effectID: request.plugin.name, key: request.prepared.key,
            connection: request.plugin.isKeyScoped ? nil : request.requester.connectionID)
        else {
            request.requester.reply("CANCELLED")
            return nil
        }
        effects[registration.effect] = EffectRecord(request: request, eventToken: token, scope: registration.scope)
        return registration.effect
    }

    /// Starts a registered effect's task (or ends it at once if a cancel won the race).
    private func launch(_ effect: EffectToken) {
        guard scopes.start(effect), let record = effects[effect] else {
            effectEnded(effect, outcome: .failure(CancellationError()))
            return
        }
        effects[effect]!.started = true
        let request = record.request
        if timed[request.plugin.index]?.cancelInFlight == true {
            timed[request.plugin.index]!.running[request.prepared.key] = effect
        }
        let context = EffectContext(
            key: request.prepared.key, connectionID: request.requester.connectionID, loop: loop, clock: clock)
        // Nonisolated and immediate: the effect starts on this thread now, and one that never
        // suspends (a tap) has replied before `launch` returns.
        let shard = self
        let task = Task.immediate(executorPreference: loop) { @concurrent () async -> Void in
            let outcome: Result<PluginReply, any Error>
            do {
                outcome = .success(try await request.plugin.run(request.prepared.input, context: context))
            } catch {
                outcome = .failure(error)
            }
            shard.endEffect(effect, outcome: outcome)
        }
        // An effect that never suspended has already ended.
        if effects[effect] != nil {
            effects[effect]!.task = task
        }
    }

    /// Ends an effect from its task, which runs on the shard's loop (its executor preference).
    private nonisolated func endEffect(_ effect: EffectToken, outcome: Result<PluginReply, any Error>) {
        assumeIsolated { $0.effectEnded(effect, outcome: outcome) }
    }

    /// An effect's task returned (or it was refused before starting): reply and forget it.
    private func effectEnded(_ effect: EffectToken, outcome: Result<PluginReply, any Error>) {
        guard let record = effects.removeValue(forKey: effect) else { return }
        scopes.finished(effect, in: record.scope)
        let request = record.request
        let index = request.plugin.index
        if let running = timed[index]?.running[request.prepared.key], running == effect {
            timed[index]!.running[request.prepared.key] = nil
        }
        let text: String
        switch outcome {
        case .success(let reply):
            text = reply.text
        case .failure(let error):
            text = record.cancelled || error is CancellationError ? "CANCELLED" : "ERR internal"
        }
        guard case .idempotent = request.plugin.policy, let identity = request.prepared.identity else {
            request.requester.reply(text)
            return
        }
        let joiners = idempotent[index]!.joiners.removeValue(forKey: record.eventToken) ?? []
        switch outcome {
        case .success(let reply):
            _ = idempotent[index]!.table.complete(
                key: identity.record, owner: record.eventToken, result: reply, isError: reply.isError, now: clock.now)
            request.requester.reply(text)
            for joiner in joiners { joiner.reply(text + " replayed=true") }
        case .failure:
            // Cancelled or failed before committing: release the record so a retry runs.
            idempotent[index]!.table.cancel(key: identity.record, owner: record.eventToken)
            request.requester.reply(text)
            for joiner in joiners { joiner.reply(text) }
        }
    }

    /// Replies to a held (not started) request and forgets it.
    private func dropHeld(_ token: EventToken, index: Int, reply: String) {
        guard let effect = timed[index]!.held.removeValue(forKey: token),
            let record = effects.removeValue(forKey: effect)
        else { return }
        scopes.finished(effect, in: record.scope)
        record.request.requester.reply(reply)
    }

    /// Switch-latest: cancels the key's running effect of this plugin.
    private func cancelRunning(key: String, index: Int) {
        guard let running = timed[index]!.running.removeValue(forKey: key) else { return }
        _ = cancel([running])
    }

    /// Cancels effects: running ones get their task cancelled (they reply when it ends), held
    /// ones reply `CANCELLED` now. Returns how many were cancelled.
    private func cancel(_ tokens: [EffectToken]) -> Int {
        var count = 0
        for effect in tokens {
            guard let record = effects[effect], !record.cancelled else { continue }
            count += 1
            if record.started {
                effects[effect]!.cancelled = true
                record.task?.cancel()
            } else {
                let index = record.request.plugin.index
                _ = timed[index]?.held.removeValue(forKey: record.eventToken)
                effects[effect] = nil
                scopes.finished(effect, in: record.scope)
                record.request.requester.reply("CANCELLED")
            }
        }
        statistics.cancelled.increment(by: count)
        return count
    }

    // MARK: - Commands

    /// `CANCEL <key> <kind>`: cancels the key's pending and running effects with one of these
    /// effect IDs (every ID when `nil`). Returns how many.
    func cancel(key: String, effectIDs: [String]?) -> Int {
        var tokens: [EffectToken] = []
        for scope in scopes.scopes(forKey: key) {
            if let effectIDs {
                for id in effectIDs { tokens += scopes.cancel(id: id, in: scope) }
            } else {
                tokens += scopes.cancelAll(in: scope)
            }
        }
        return cancel(tokens)
    }

    /// A connection closed: cancels every effect in its scope (not the key-scoped ones).
    func connectionClosed(_ connectionID: UInt64) {
        let tokens = scopes.closeConnection(connectionID)
        _ = cancel(tokens)
    }

    /// The number of keys this shard tracks, over all plugins' tables.
    public func keyCount() -> Int {
        var total = 0
        for plugin in timed where plugin != nil { total += plugin!.table.keyCount }
        for plugin in idempotent where plugin != nil { total += plugin!.table.table.count }
        return total
    }

    /// The number of effects registered and not yet ended.
    public func effectCount() -> Int {
        effects.count
    }

    // MARK: - Sweeping

    /// Starts the periodic sweep of idle keys. Call on the loop.
    func startSweeping() {
        sweepTimer = clock.schedule(at: clock.now + Self.sweepInterval) { [self] in
            self.assumeIsolated { $0.sweep() }
        }
    }

    /// Stops the periodic sweep.
    func stopSweeping() {
        sweepTimer?.cancel()
        sweepTimer = nil
    }

    private func sweep() {
        let now = clock.now
        for index in timed.indices where timed[index] != nil {
            _ = timed[index]!.table.sweep(now: now, maxEntries: Self.sweepBatch)
        }
        for index in idempotent.indices where idempotent[index] != nil {
            idempotent[index]!.table.sweep(now: now, maxEntries: Self.sweepBatch)
        }
        if sweepTimer != nil { startSweeping() }
    }
}

/// A throttle- or debounce-governed plugin's state in one shard.
private struct TimedPlugin {
    var table: TimedPolicyTable
    let cancelInFlight: Bool
    /// Requests the policy holds (not started), by their event token.
    var held: [EventToken: EffectToken] = [:]
    /// The one outstanding timer per key.
    var timers: [String: any GateTimer] = [:]
    /// Switch-latest: the running effect per key.
    var running: [String: EffectToken] = [:]

    init(table: TimedPolicyTable, cancelInFlight: Bool) {
        self.table = table
        self.cancelInFlight = cancelInFlight
    }
}

/// An idempotent plugin's state in one shard.
private struct IdempotentPlugin {
    var table: IdempotencyTable<String, String, PluginReply>
    /// Duplicates waiting for a running execution, by the owner's event token.
    var joiners: [EventToken: [Requester]] = [:]
}

/// One effect, from registration to its reply.
private struct EffectRecord {
    let request: GateRequest
    let eventToken: EventToken
    let scope: ScopeID
    var started = false
    var cancelled = false
    var task: Task<Void, Never>?
}

/// The keyed policy table of a throttle or a debounce plugin: exactly one of the two is set.
/// (Two optionals rather than an existential or an enum: both mutate in place, specialised,
/// without copying the table.)
struct TimedPolicyTable {
    private var throttle: ThrottleTable<String>?
    private var debounce: DebounceTable<String>?

    init(throttle: ThrottleTable<String>) {
        self.throttle = throttle
    }

    init(debounce: DebounceTable<String>) {
        self.debounce = debounce
    }

    mutating func event(_ token: EventToken, key: String, now: Instant) -> KeyedDecision {
        if throttle != nil { return throttle!.event(token, key: key, now: now) }
        return debounce!.event(token, key: key, now: now)
    }

    mutating func fire(key: String, now: Instant) -> FireDecision {
        if throttle != nil { return throttle!.fire(key: key, now: now) }
        return debounce!.fire(key: key, now: now)
    }

    mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        if throttle != nil { return throttle!.sweep(now: now, maxEntries: maxEntries) }
        return debounce!.sweep(now: now, maxEntries: maxEntries)
    }

    var keyCount: Int {
        throttle?.table.count ?? debounce?.table.count ?? 0
    }
}

extension Duration {
    /// This duration in whole milliseconds, rounded up (a client that waits this long is in
    /// time).
    var wholeMillisecondsRoundedUp: Int64 {
        let nanoseconds = nanosecondsClamped
        return nanoseconds <= 0 ? 0 : (nanoseconds + 999_999) / 1_000_000
    }
}

extension MemoryBudget {
    /// This budget split evenly over `parts` shards.
    func divided(by parts: Int) -> MemoryBudget {
        MemoryBudget(
            entries: entries.map { max(1, $0 / parts) },
            bytes: bytes.map { max(1, $0 / parts) },
            extraBytesPerKey: extraBytesPerKey)
    }
}
