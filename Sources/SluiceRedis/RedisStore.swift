import CoreMetrics
import Logging
import Sluice
import SluiceCore
import SluiceLibevent
import Synchronization

/// A `SharedStore` in Redis: the state of throttles, GCRA rate limits and idempotency records
/// that several Sluice instances share.
///
/// One connection per loop of the group (hiredis's libevent adapter on that loop's
/// `event_base`: no thread of its own, no hop); every decision is one `EVALSHA` of a Lua script
/// that reads Redis's clock (`TIME`). Keys are `<prefix>:{<plugin>:<key>}:<kind>`: the hash tag
/// keeps a record and its fence counter in one slot. The stages of a limit chain are
/// `<prefix>:{<key>}:<plugin>/<stage>:<kind>`, tagged by the stage's key, so that the stages of
/// one request counted under the same key are decided by one script. Every key has a TTL but the epoch marker
/// (`<prefix>:epoch`), which tells the instances that Redis came back without its data: the
/// fencing tokens it grants then start a new epoch, greater than every earlier token, and the
/// plugins whose records it held say so in their answers for one retention.
///
/// When Redis is unreachable or slower than `timeout`, calls fail at once with `StoreError`
/// and the plugin's `StoreFailureMode` decides; the connections reconnect by themselves, so
/// the store is used again as soon as Redis answers. An outage is logged once (by the
/// connection), and every failed call is counted (`sluice_store_failures_total`).
///
/// Exactly-once across instances needs the records to outlive a Redis restart: run Redis with
/// `appendonly yes` (and `appendfsync always` for payments).
public final class RedisStore: SharedStore {
    /// The server and database.
    public let endpoint: RedisEndpoint
    private let prefix: String
    private let connections: [ObjectIdentifier: RedisConnection]
    private let logger: Logger
    /// Answers the scripts do not allow (a script error, `OOM`, `READONLY` after a failover,
    /// `MOVED` from a cluster): counted, and logged at most once a minute.
    private let protocolErrors = Counter(label: "sluice_store_failures_total", dimensions: [("reason", "protocol")])
    private let lastProtocolLog = Mutex<ContinuousClock.Instant?>(nil)

    /// A store on `endpoint` with a connection on each loop of `group`; call ``start()``.
    ///
    /// - Parameters:
    ///   - endpoint: the Redis server and database.
    ///   - group: the loops the gate's shards run on.
    ///   - timeout: how long a decision may wait for Redis before it counts as a failure.
    ///   - prefix: the first part of every key.
    ///   - logger: where outages are logged.
    public init(
        endpoint: RedisEndpoint, group: SluiceLoopGroup, timeout: Duration = .milliseconds(200), prefix: String = "sluice",
        logger: Logger = Logger(label: "sluice.redis")
    ) {
        self.endpoint = endpoint
        self.prefix = prefix
        self.logger = logger
        var connections: [ObjectIdentifier: RedisConnection] = [:]
        for loop in group.loops {
            connections[ObjectIdentifier(loop)] = RedisConnection(endpoint: endpoint, loop: loop, timeout: timeout, logger: logger)
        }
        self.connections = connections
    }

    /// Connects every loop's connection (they reconnect by themselves from then on).
    public func start() {
        for connection in connections.values { connection.start() }
    }

    /// Closes every connection (from any thread; on a loop thread, that loop's connection
    /// closes at once and the others later).
    public func close() {
        for connection in connections.values { connection.close() }
    }

    /// Closes every connection on its loop and returns once they are all closed: the calls
    /// still waiting have been answered (`unavailable`) on their loops, which still run. Call
    /// it after the gate has drained and before the loops stop, so that no store callback is
    /// left for a loop that has stopped.
    public func shutdown() async {
        for connection in connections.values {
            let loop = connection.loop
            await loop.submit { connection.close() }
        }
    }

    /// The server and database, as a `redis://` URL.
    public var address: String { endpoint.description }

    /// Whether the connection of `loop` is usable now (read on that loop).
    public func isConnected(on loop: SluiceLoop) -> Bool {
        connection(for: loop)?.isConnected ?? false
    }

    /// The connection on `caller`'s loop, if it is one of the store's loops.
    func connection(for caller: any StoreCaller) -> RedisConnection? {
        connections[ObjectIdentifier(caller)]
    }

    /// Whether the connection of `loop` is usable now: a lost connection (Redis killed,
    /// restarting) makes the commit guard refuse, since the lease cannot be renewed.
    public func isReachable(from caller: any StoreCaller) -> Bool {
        connection(for: caller)?.isConnected ?? false
    }

    // MARK: - Keys

    func key(_ key: StoreKey, _ kind: String) -> [UInt8] {
        var bytes = Array(prefix.utf8)
        bytes.append(contentsOf: ":{".utf8)
        bytes.append(contentsOf: key.plugin.utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: key.key.utf8)
        bytes.append(contentsOf: "}:".utf8)
        bytes.append(contentsOf: kind.utf8)
        return bytes
    }

    /// The store's epoch marker, `<prefix>:epoch`: written with Redis's clock at first use and
    /// never expiring, so that a Redis that lost its data writes it again, later (see
    /// ``FencingToken``). The idempotency scripts read it with the record's keys, so records
    /// need a single Redis server (not a cluster, whose scripts must keep to one slot).
    var epochKey: [UInt8] { Array("\(prefix):epoch".utf8) }

    static func argument(_ value: some BinaryInteger) -> [UInt8] { Array(String(value).utf8) }

    static func microseconds(_ duration: Duration) -> Int64 {
        max(1, duration.nanosecondsClamped / 1_000)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, (duration.nanosecondsClamped + 999_999) / 1_000_000)
    }

    /// A GCRA's emission interval and tolerance as the scripts take them: microseconds, the
    /// interval with three decimals (nanoseconds), so that high rates are not rounded to a whole
    /// microsecond.
    static func gcraArguments(_ options: RateLimitOptions) -> (emission: [UInt8], tolerance: [UInt8]) {
        let emission = max(1, options.period.nanosecondsClamped / Int64(options.count))
        let emissionText = "\(emission / 1_000).\(String(emission % 1_000 + 1_000).dropFirst())"
        let tolerance = emission.multipliedReportingOverflow(by: Int64(options.limit))
        let toleranceText = tolerance.overflow ? "9007199254740992" : "\(tolerance.partialValue / 1_000)"
        return (Array(emissionText.utf8), Array(toleranceText.utf8))
    }

    // MARK: - Running scripts

    /// Runs `script` on the connection of `caller`'s loop and hands its reply to `parse`;
    /// completes on that loop, never from inside this call.
    func run<Value: Sendable>(
        _ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]], on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Value, StoreError>) -> Void,
        parse: @escaping @Sendable (RedisReply) -> Value?
    ) {
        guard let connection = connection(for: caller) else {
            caller.execute { completion(.failure(StoreError(code: .unavailable, message: "no Redis connection on this loop"))) }
            return
        }
        let finish: @Sendable (Result<RedisReply, RedisCallError>) -> Void = { result in
            switch result {
            case .success(let reply):
                if let value = parse(reply) {
                    completion(.success(value))
                } else {
                    self.protocolError(reply)
                    completion(.failure(StoreError(code: .protocolError, message: "unexpected reply to a store script", value: "\(reply)")))
                }
            case .failure(let error):
                let code: StoreError.Code = error.code == .timeout ? .timeout : .unavailable
                // A call that fails at once completes inside `send`: defer it to keep the
                // store's promise (never from inside the call).
                caller.execute { completion(.failure(StoreError(code: code, message: error.message))) }
            }
        }
        connection.send(script.evalsha(keys: keys, arguments: arguments)) { result in
            if case .success(.error(let message)) = result, message.hasPrefix("NOSCRIPT") {
                // Redis restarted or its scripts were flushed: EVAL runs the script and loads it.
                connection.send(script.eval(keys: keys, arguments: arguments), completion: finish)
                return
            }
            finish(result)
        }
    }

    private func protocolError(_ reply: RedisReply) {
        protocolErrors.increment()
        let now = ContinuousClock.now
        let log = lastProtocolLog.withSanitizedLock { last -> Bool in
            if let last, now - last < .seconds(60) { return false }
            last = now
            return true
        }
        if log {
            logger.error(
                "Redis answered a store script with something it does not allow; decisions fall back as configured",
                metadata: ["redis": "\(endpoint)", "reply": "\(String(describing: reply).prefix(200))"])
        }
    }

    // MARK: - SharedStore

    public func throttle(
        _ key: StoreKey, interval: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Duration?, StoreError>) -> Void
    ) {
        let stage = StoreStage(scope: key.plugin, key: key.key, limit: .throttle(interval: interval))
        decide(stage, key: self.key(key, "t"), cost: 1, on: caller) { verdict in
            completion(
                verdict.flatMap { verdict in
                    guard case .throttle(let wait, _) = verdict else { return .failure(Self.unexpectedVerdict) }
                    return .success(wait)
                })
        }
    }

    public func rateLimit(
        _ key: StoreKey, options: RateLimitOptions, cost: Int, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<RateLimitDecision, StoreError>) -> Void
    ) {
        let stage = StoreStage(scope: key.plugin, key: key.key, limit: .rate(options))
        decide(stage, key: self.key(key, "g"), cost: cost, on: caller) { verdict in
            completion(
                verdict.flatMap { verdict in
                    guard case .stage(.rate(let decision)) = verdict else { return .failure(Self.unexpectedVerdict) }
                    return .success(decision)
                })
        }
    }

    /// A verdict of another kind than the stage asked (the script and its parser disagree).
    private static let unexpectedVerdict = StoreError(code: .protocolError, message: "a store script answered another kind of stage")

    public func claim(
        _ record: StoreKey, fingerprint: String, owner: String, lease: Duration, retention: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreClaim, StoreError>) -> Void
    ) {
        // The fence counter outlives its record's lease (a late owner's completion checks it)
        // and the record's retention (a later claim's fence must be greater than every fence a
        // downstream may have seen for the record): renewals and the completion extend it.
        let counterTTL = max(Self.milliseconds(lease) * 4, Self.milliseconds(retention) + Self.milliseconds(lease))
        run(
            RedisStoreScripts.claim, keys: [self.key(record, "r"), self.key(record, "f"), epochKey],
            arguments: [
                Array(fingerprint.utf8), Array(owner.utf8), Self.argument(Self.milliseconds(lease)), Self.argument(counterTTL),
            ], on: caller, completion
        ) { reply in
            guard let fields = reply.array, let kind = fields.first?.text else { return nil }
            switch (kind, fields.count) {
            case ("claimed", 3):
                guard let counter = fields[1].int.flatMap(UInt32.init(exactly:)), counter <= FencingToken.maximumCounter,
                    let epoch = fields[2].text.flatMap(UInt64.init), epoch < 1 << 42
                else { return nil }
                return .claimed(StoreLease(owner: owner, fence: FencingToken(epoch: epoch, counter: counter)))
            case ("running", 1):
                return .running
            case ("completed", 2):
                return fields[1].bytes.map { .completed($0) }
            case ("mismatch", 2):
                return fields[1].text.map { .mismatch(storedFingerprint: $0) }
            default:
                return nil
            }
        }
    }

    public func renew(
        _ record: StoreKey, lease: StoreLease, fingerprint: String, duration: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        run(
            RedisStoreScripts.renew, keys: [key(record, "r"), key(record, "f"), epochKey],
            arguments: [
                Array(lease.owner.utf8), Self.argument(lease.fence.counter), Self.argument(Self.milliseconds(duration)),
                Array(fingerprint.utf8), Self.argument(lease.fence.epoch),
            ], on: caller, completion
        ) { $0.int.map { $0 == 1 } }
    }

    public func complete(
        _ record: StoreKey, lease: StoreLease, fingerprint: String, result: [UInt8], retention: Duration,
        on caller: any StoreCaller, _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        run(
            RedisStoreScripts.complete, keys: [key(record, "r"), key(record, "f"), epochKey],
            arguments: [
                Array(lease.owner.utf8), Self.argument(lease.fence.counter), result,
                Self.argument(Self.milliseconds(retention)), Array(fingerprint.utf8), Self.argument(lease.fence.epoch),
            ], on: caller, completion
        ) { $0.int.map { $0 == 1 } }
    }

    public func release(
        _ record: StoreKey, lease: StoreLease, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        run(
            RedisStoreScripts.release, keys: [key(record, "r"), epochKey],
            arguments: [
                Array(lease.owner.utf8), Self.argument(lease.fence.counter), Self.argument(lease.fence.epoch),
            ], on: caller, completion
        ) { $0.int.map { $0 == 1 } }
    }
}
