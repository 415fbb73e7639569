import Logging
import SluiceLibevent

/// One pipelined connection to Redis, driven by one `SluiceLoop`: a hiredis
/// async context attached to the loop's `event_base`.
///
/// ```swift
/// let connection = RedisConnection(endpoint: try RedisEndpoint(url: "redis://127.0.0.1:6379/1"),
///                                  loop: loop, logger: logger)
/// connection.onAvailabilityChange = { available in health.redis(available) }
/// connection.start()
/// loop.execute {
///     connection.send(["INCR", "hits"]) { result in
///         // on the loop: .success(.integer(1)), or .failure(.unavailable / .timeout)
///     }
/// }
/// ```
///
/// **Calls.** `send(_:completion:)` runs on the connection's loop. Many calls may be
/// outstanding; Redis answers them in order. Every completion is called exactly once, on the
/// loop: with the reply (an error reply is a reply), with `.timeout` when no reply came within
/// ``timeout``, or with `.unavailable` when there is no usable connection. A call made while
/// the connection is down fails at once (callers fall back during an outage instead of
/// queueing behind a reconnect).
///
/// **Timeouts.** A call that times out is answered `.timeout` once; its reply, should it come
/// later, is dropped, and the connection is kept: Redis may just be slow (a long script, a
/// fork, `CLIENT PAUSE`). When the oldest unanswered call has waited ``stallLimit`` (five
/// timeouts, at least a second), the server is taken to be stalled or unreachable (a dead
/// peer can keep a TCP connection open for minutes): the connection is dropped, its other calls
/// fail `.unavailable`, and it reconnects.
///
/// **Reconnecting.** ``start()`` connects, then selects the endpoint's database before
/// anything else: calls are accepted once `SELECT` has answered `OK`, so none can land in
/// another database. A failed connect, a lost connection, a failed `SELECT` or a connect that
/// takes longer than the connect timeout is retried by itself, after 25 ms doubling to 1 s
/// (with jitter), until ``close()``.
///
/// **Health.** ``onAvailabilityChange`` is told on the loop when the connection becomes usable
/// and when it stops being usable. An outage is logged once: a warning when the connection is
/// lost (or cannot be made at first), an info when it is back, with how long it was down and
/// how many calls failed meanwhile. Every failed call counts in
/// `sluice_store_failures_total{reason="timeout"|"unavailable"}`.
///
/// Commands that would change the connection itself are refused with `.invalidCommand`:
/// `SELECT` (the database is the endpoint's), `SUBSCRIBE` and the other pub/sub commands,
/// `MONITOR`, `RESET`, `HELLO`, `CLIENT REPLY`, `SYNC`/`PSYNC`. Blocking commands (`BLPOP`)
/// do not belong here either: they time out and hold up the calls behind them.
public final class RedisConnection: Sendable {
    /// The server and database.
    public let endpoint: RedisEndpoint
    /// The loop the connection runs on; calls are made, and answered, on it.
    public let loop: SluiceLoop
    /// How long a call may wait for its reply.
    public let timeout: Duration
    /// How long connecting, and the `SELECT` after it, may take before the attempt is given up
    /// and retried.
    public let connectTimeout: Duration

    /// The state that lives on the loop.
    private let core: RedisConnectionCore

    /// A connection to `endpoint` on `loop`; call ``start()`` to connect.
    ///
    /// - Parameters:
    ///   - endpoint: the server and database.
    ///   - loop: the loop the connection runs on.
    ///   - timeout: how long each call may wait for its reply; more than zero.
    ///   - connectTimeout: how long connecting and selecting the database may take; more than
    ///     zero.
    ///   - logger: where outages and reconnections are logged (with the endpoint as metadata).
    public init(
        endpoint: RedisEndpoint, loop: SluiceLoop, timeout: Duration = .milliseconds(200),
        connectTimeout: Duration = .seconds(1), logger: Logger
    ) {
        precondition(timeout > .zero, "RedisConnection timeout must be more than zero")
        precondition(connectTimeout > .zero, "RedisConnection connectTimeout must be more than zero")
        self.endpoint = endpoint
        self.loop = loop
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        core = RedisConnectionCore(
            endpoint: endpoint, loop: loop, timeout: timeout, connectTimeout: connectTimeout, logger: logger)
    }

    deinit {
        close()
    }

    /// How long the oldest unanswered call may wait before the connection is dropped and made
    /// again: five ``timeout``s, at least one second.
    public var stallLimit: Duration { core.stallLimit }

    /// Told, on the loop, `true` when the connection becomes usable and `false` when it stops
    /// being usable (lost, or closed). Set it before ``start()``. It may call `send(_:completion:)`
    /// and ``close()``.
    public var onAvailabilityChange: (@Sendable (Bool) -> Void)? {
        get { core.availabilityHandler.withSanitizedLock { $0 } }
        set { core.availabilityHandler.withSanitizedLock { $0 = newValue } }
    }

    /// Starts connecting (and reconnecting whenever the connection is lost) until ``close()``.
    ///
    /// Callable from any thread: the work happens on the loop (at once when called on it).
    /// Calling it again, after ``close()`` or once the loop has shut down does nothing.
    public func start() {
        if loop.inEventLoop {
            core.start()
        } else {
            loop.executeIfRunning { [core] in core.start() }
        }
    }

    /// Closes the connection for good: outstanding calls fail with `.unavailable`, and it no
    /// longer reconnects.
    ///
    /// Callable from any thread (at once on the loop, else queued to it). The loop also closes
    /// the connection when it shuts down; after that this does nothing.
    public func close() {
        if loop.inEventLoop {
            core.close()
        } else {
            loop.executeIfRunning { [core] in core.close() }
        }
    }

    /// Whether the connection is usable now. Read it on the loop.
    public var isConnected: Bool {
        core.isConnected
    }

    /// Sends a command; `completion` gets its reply, on the loop, exactly once.
    ///
    /// Call on the connection's loop. Commands are pipelined: the call returns once the
    /// command is queued, and replies come back in the order the commands were sent.
    ///
    /// When the call fails at once (not connected: `.unavailable`; a refused command:
    /// `.invalidCommand`), `completion` runs before `send` returns. Otherwise it runs later,
    /// from the loop: with the reply, `.timeout` after ``timeout``, or `.unavailable` when the
    /// connection is lost or closed first.
    ///
    /// - Parameters:
    ///   - arguments: the command and its arguments, as bytes: `[Array("GET".utf8), key]`.
    ///   - completion: the outcome.
    public func send(
        _ arguments: [[UInt8]], completion: @escaping @Sendable (Result<RedisReply, RedisCallError>) -> Void
    ) {
        loop.assertInEventLoop()
        core.send(arguments, completion: completion)
    }

    /// Sends a command given as text, each argument as UTF-8 (see the `[[UInt8]]` variant).
    ///
    /// - Parameters:
    ///   - arguments: the command and its arguments: `["SET", "key", "value"]`.
    ///   - completion: the outcome.
    public func send(
        _ arguments: [String], completion: @escaping @Sendable (Result<RedisReply, RedisCallError>) -> Void
    ) {
        send(arguments.map { Array($0.utf8) }, completion: completion)
    }

    /// Sends a command from any context and waits for its outcome: hops to the loop, calls
    /// `send(_:completion:)` there, and resumes with what the completion got.
    ///
    /// - Parameter arguments: the command and its arguments.
    /// - Returns: the reply, or why there is none.
    public func call(_ arguments: [[UInt8]]) async -> Result<RedisReply, RedisCallError> {
        await withCheckedContinuation { continuation in
            let delivered = loop.executeIfRunning { [self] in
                send(arguments) { continuation.resume(returning: $0) }
            }
            if !delivered {
                continuation.resume(
                    returning: .failure(RedisCallError(code: .unavailable, message: "the loop has shut down")))
            }
        }
    }

    /// `call(_:)` with the arguments as text.
    ///
    /// - Parameter arguments: the command and its arguments: `["GET", "key"]`.
    /// - Returns: the reply, or why there is none.
    public func call(_ arguments: [String]) async -> Result<RedisReply, RedisCallError> {
        await call(arguments.map { Array($0.utf8) })
    }
}
