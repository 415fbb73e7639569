import SluiceCore
import SluiceLibevent

/// Where plugins keep the state their policies decide on when more than one process serves the
/// same keys: a leading throttle's windows, a GCRA's arrival times and idempotency records with
/// fencing. `MemoryStore` keeps them in this process; `SluiceRedis`'s `RedisStore` keeps them
/// in Redis, so that every instance behind a load balancer sees the same state.
///
/// A plugin chooses its store when it is registered (``PluginStore``). The gate calls these
/// methods on the loop of the shard that owns the key and passes that loop as the `caller`
/// (a ``StoreCaller``: no loop type appears in this protocol, so a store can be driven by a
/// simulation on one thread), and a store calls each completion exactly once, through the
/// caller's `execute` or on the caller's thread, never from inside the call itself. A store answers
/// every decision in one step, with its own clock (never the callers'), and fails a call with
/// ``StoreError`` rather than guess: the plugin's ``StoreFailureMode`` decides what then
/// happens.
///
/// Idempotency records follow a lease protocol: ``claim(_:fingerprint:owner:lease:retention:on:_:)``
/// opens a record for one owner and returns a ``StoreLease`` with a fencing token; the owner
/// renews it while its effect runs; ``complete(_:lease:fingerprint:result:retention:on:_:)`` and
/// ``release(_:lease:on:_:)`` are accepted only with the current lease, so a stale owner (one
/// whose lease ran out and was taken over) can neither overwrite nor delete the record. The
/// fingerprint is kept with the result.
///
/// Fencing tokens grow with every claim of a record for as long as its records are kept
/// (`retention`), and across a loss of the store's data: a store that can lose its data (a
/// restart without persistence) starts a new *epoch* when it comes back empty, the tokens' high
/// part (``FencingToken/epoch``). A lease of an earlier epoch is never current again.
public protocol SharedStore: Sendable {
    /// A leading-only throttle: `nil` when the request may run (its window starts now), else how
    /// long until the key may run again.
    func throttle(
        _ key: StoreKey, interval: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Duration?, StoreError>) -> Void)

    /// A GCRA decision for `cost` units, with the fields redis-cell returns. A refused request
    /// spends nothing.
    func rateLimit(
        _ key: StoreKey, options: RateLimitOptions, cost: Int, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<RateLimitDecision, StoreError>) -> Void)

    /// Claims the record for `owner` (unique to this execution, across processes) unless it is
    /// held, completed or used with another fingerprint. A record whose lease ran out is
    /// claimed again, with a greater fencing token. `retention` is how long a completed record
    /// is kept: the record's claims are counted at least that long, so that a later claim's
    /// fence is still greater than every earlier one's.
    func claim(
        _ record: StoreKey, fingerprint: String, owner: String, lease: Duration, retention: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreClaim, StoreError>) -> Void)

    /// Extends a running owner's lease to `duration` from now. A lease that ran out is still
    /// current until another owner claims the record: it is renewed (the record opened again with
    /// `fingerprint`). `false` when another owner claimed it since: nothing changes.
    func renew(
        _ record: StoreKey, lease: StoreLease, fingerprint: String, duration: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Stores the result of the lease's execution, kept `retention`, with the claim's
    /// `fingerprint`. `false` when the lease is not current (a stale owner): nothing changes.
    /// A lease that ran out is still current until another owner claims the record, so a slow
    /// owner whose record expired unclaimed still stores its result. Completing twice with the
    /// same lease is accepted (a retried write).
    func complete(
        _ record: StoreKey, lease: StoreLease, fingerprint: String, result: [UInt8], retention: Duration,
        on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Deletes the record the lease holds, so that a retry runs (the execution was cancelled
    /// before it committed). `false` when the lease is not current: nothing changes.
    func release(
        _ record: StoreKey, lease: StoreLease, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Decides `stages` for a request of `cost` units, all or nothing, in one step: each stage
    /// in order, and when one refuses (and is not in shadow mode), nothing changes in any of
    /// them. An admitted request holds a slot of each concurrency stage under `owner` (unique to
    /// its execution, across processes) for the stage's lease. Called only with stages that
    /// ``place(of:)`` puts in one place.
    func admit(
        _ stages: [StoreStage], cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void)

    /// Gives back what `admission` holds of `stages` (the stages it was decided on): `cost` is
    /// subtracted from each rate stage's state (never an earlier state restored, so what other
    /// requests spent since is kept; `0` gives nothing back), `owner`'s slot of each
    /// concurrency stage is freed, and each throttle window it opened is closed while it is
    /// still that window.
    func giveBack(
        _ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Extends `owner`'s slot in each concurrency stage among `stages` to the stage's lease from
    /// now; answers how many of them it still held (a slot whose lease ran out is not taken
    /// again).
    func renewSlots(
        _ stages: [StoreStage], owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void)

    /// Where the store keeps `stage`'s state: consecutive stages with the same place are decided
    /// in one step, others one after another, each refusal giving back what the earlier steps
    /// took (``admitChain(_:cost:owner:on:_:)``). `nil`, the default, puts every stage in one
    /// place.
    func place(of stage: StoreStage) -> Int?

    /// Where the store is, for log lines (a Redis server's address); the type's name by default.
    var address: String { get }

    /// Whether a call made now from `caller` can reach the store, as far as this process knows
    /// (`false` once its connection is lost, until it is made again); read on the caller's
    /// thread. The
    /// commit guard refuses to commit under a lease that cannot be renewed. `true` by default.
    func isReachable(from caller: any StoreCaller) -> Bool
}

extension SharedStore {
    public var address: String { "\(Self.self)" }

    public func isReachable(from caller: any StoreCaller) -> Bool { true }

    public func place(of stage: StoreStage) -> Int? { nil }
}

/// A plugin's key in a shared store: the plugin's name and the full key (or idempotency record),
/// never a hash of it.
public struct StoreKey: Sendable, Hashable, CustomStringConvertible {
    /// The plugin's name.
    public let plugin: String
    /// The key or record.
    public let key: String

    /// A key of `plugin`.
    public init(plugin: String, key: String) {
        self.plugin = plugin
        self.key = key
    }

    public var description: String { "\(plugin):\(key)" }
}

/// An owner's hold on an idempotency record.
public struct StoreLease: Sendable, Hashable {
    /// Who holds it: unique to one execution across processes.
    public let owner: String
    /// The fencing token: greater for every later claim of the same record, across a loss of
    /// the store's data too (its epoch, the high part, is then greater).
    public let fence: FencingToken

    /// A lease of `owner` with fencing token `fence`.
    public init(owner: String, fence: FencingToken) {
        self.owner = owner
        self.fence = fence
    }
}

/// What claiming an idempotency record found.
public enum StoreClaim: Sendable, Hashable {
    /// The record is this owner's now.
    case claimed(StoreLease)
    /// Another owner holds it and its lease has not run out.
    case running
    /// It holds a result (stored with the same fingerprint).
    case completed([UInt8])
    /// It was opened with another fingerprint, the one given here.
    case mismatch(storedFingerprint: String)
}
