import CoreMetrics
import Logging
import SluiceCore

/// A plugin lane's side of a shared store: the store and what to do when it fails, and what this
/// process holds in it — the leases of the idempotent executions running here (with their
/// heartbeats), results whose write has not landed yet, and duplicates polling for another
/// instance's result.
///
/// Used on the loop of the shard that holds the lane, like the lane itself.
@usableFromInline
final class SharedLaneState<Output: Sendable> {
    /// An execution of this process holding a record, or its result still being written.
    struct Flight {
        let token: EventToken
        let fingerprint: String
    }

    /// A result whose completion has not reached the store yet: duplicates here replay it, and
    /// the write is retried until the store accepts or refuses it.
    struct Unwritten {
        /// The execution that produced it (its lease is renewed until the write lands).
        let token: EventToken
        let fingerprint: String
        /// The lease it is written under: the execution's, or a later one this process's own
        /// claim was granted once that ran out.
        var lease: StoreLease
        let result: Result<Output, any Error>
        let bytes: [UInt8]
    }

    let store: any SharedStore
    let failureMode: StoreFailureMode
    /// The policy as configured (the lane's own stage holds the local fallback's state).
    let policy: GatePolicy
    /// Unique to this lane in this process, so that owners are unique across instances.
    let instance: String
    let logger: Logger
    /// Requests decided by this process alone, by failure mode, because the store failed.
    let fallbacks: [StoreFailureMode: Counter]
    /// Completions and heartbeats the store refused because their lease was no longer current.
    let staleOwners: Counter
    /// Concurrency slots in the store that ran out before their renewal (an outage longer than
    /// their lease): another instance may have taken them.
    let slotsLost: Counter

    var flights: [String: Flight] = [:]
    /// The leases of the executions running here (and of the results still being written), by
    /// execution.
    var held: [EventToken: SharedRecordLease] = [:]
    var heartbeats: [EventToken: any GateTimer] = [:]
    var unwritten: [String: Unwritten] = [:]
    var polls: [EventToken: any GateTimer] = [:]
    /// The jitter of this lane's polls.
    var jitter = SplitMix64()
    /// Record releases sent and not yet answered (or given up).
    var pendingReleases = 0
    /// The plugin's watch over the store's epochs (shared by its shards).
    let epochWatch: StoreEpochWatch
    /// The episodes of data loss this lane has marked its answers for.
    var seenEpisodes = 0
    /// Until when this lane's answers say the store lost its data lately.
    var degradedUntil: Instant?

    /// Results not written yet that one lane holds at most; past it, new claims are refused
    /// (`unavailable`) until the store takes them.
    static var maximumUnwritten: Int { 4_096 }

    init(store: PluginStore, shared: any SharedStore, policy: GatePolicy, plugin: String, epochWatch: StoreEpochWatch) {
        self.store = shared
        self.epochWatch = epochWatch
        self.failureMode = store.whenUnavailable
        self.policy = policy
        self.instance = String(UInt64.random(in: 1...UInt64.max), radix: 36)
        self.logger = Logger(label: "sluice.store")
        self.fallbacks = Dictionary(
            uniqueKeysWithValues: StoreFailureMode.allCases.map {
                ($0, Counter(label: "sluice_store_fallbacks_total", dimensions: [("plugin", plugin), ("mode", $0.rawValue)]))
            })
        self.staleOwners = Counter(label: "sluice_store_stale_owners_total", dimensions: [("plugin", plugin)])
        self.slotsLost = Counter(label: "sluice_store_slots_lost_total", dimensions: [("plugin", plugin)])
    }

    /// How long a concurrency slot in the store outlives its last renewal: the records' lease
    /// for an idempotent plugin, ten seconds otherwise. An instance that stops frees its slots
    /// within it.
    var slotLease: Duration { idempotency?.lease ?? .seconds(10) }

    /// The idempotency options, for an idempotent plugin.
    var idempotency: IdempotencyOptions? {
        if case .idempotent(let options) = policy { return options }
        return nil
    }

    func countFallback() {
        fallbacks[failureMode]?.increment()
    }

    /// Notes the epoch of a fence the store granted: a new one means the store lost its data.
    func observe(epoch: UInt64, now: Instant) {
        _ = epochWatch.observe(epoch, store: store.address)
        noteEpisodes(now: now)
    }

    /// Starts a retention of marked answers when an episode this lane has not marked for was
    /// seen (by any shard).
    func noteEpisodes(now: Instant) {
        let episodes = epochWatch.episodes
        guard episodes > seenEpisodes, let retention = idempotency?.retention else { return }
        seenEpisodes = episodes
        degradedUntil = now + retention
    }

    /// `outcome`, marked ``RunInfo/Guarantee/storeDataLost`` within a retention of the store's
    /// last loss of its data.
    func marked(_ outcome: GateOutcome<Output>, now: Instant) -> GateOutcome<Output> {
        noteEpisodes(now: now)
        guard let until = degradedUntil else { return outcome }
        guard now < until else {
            degradedUntil = nil
            return outcome
        }
        return outcome.markedStoreDataLost
    }
}
