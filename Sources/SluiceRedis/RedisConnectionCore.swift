internal import CHiredis
import CoreMetrics
import DequeModule
import Logging
import SluiceCore
import SluiceLibevent
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The loop-confined engine behind a ``RedisConnection``: one hiredis async context at a time,
/// the calls waiting for replies, the timers, reconnection and health reporting.
///
/// Everything here runs on ``loop``'s thread. hiredis calls back into it through the C
/// functions at the bottom of this file, from libevent callbacks on the same thread.
///
/// Life of a context, and how the core learns that hiredis has freed it:
/// - `redisAsyncConnect`, attached to the loop's base; `data` holds a retained reference to the
///   core, so that the core outlives every callback hiredis makes for the context.
/// - Connecting fails: hiredis calls the connect callback with `REDIS_ERR`, then frees the
///   context. The callback drops the reference.
/// - The connection drops (EOF, reset, a protocol error): hiredis runs every pending reply
///   callback with a NULL reply, then the disconnect callback, then frees the context. The
///   first NULL reply (or the disconnect callback, with nothing pending) detaches the context;
///   the disconnect callback drops the reference.
/// - The core gives the context up (``close()``, a stalled or desynchronised connection, a
///   failed `SELECT`): it detaches first, then calls `redisAsyncFree`. hiredis runs the
///   callbacks as above, now for a context that is no longer current: they are ignored, except
///   that the disconnect callback drops the reference. A context that never connected gets no
///   disconnect callback, so the core drops the reference itself after the (then synchronous)
///   free. Inside a reply callback, hiredis defers the free until the callback returns.
///
/// User code (completions, the availability hook) runs only after the core's state is
/// consistent: inside a reply callback, a timer, or synchronously in ``send(_:completion:)``
/// when a call fails at once; never inside the connect callback, where freeing the context
/// would pull it from under hiredis.
final class RedisConnectionCore: LoopResource, @unchecked Sendable {
    // @unchecked Sendable: the immutable properties are Sendable, `availabilityHandler` is a
    // Mutex, and every `var` is read and written on `loop`'s thread only: the public entry
    // points either assert that (`send`, `isConnected`) or hop there first (`start`, `close`),
    // timers fire there, and hiredis calls back there (its events are on the loop's base).

    typealias Completion = @Sendable (Result<RedisReply, RedisCallError>) -> Void

    /// Where the connection stands.
    enum Phase {
        /// ``start()`` not yet called.
        case idle
        /// TCP connect in progress.
        case connecting
        /// Connected; `SELECT db` sent, its reply awaited. Calls are refused until it arrives.
        case handshaking
        /// Usable.
        case connected
        /// No context: waiting for the reconnect timer.
        case waiting
        /// Closed for good.
        case closed
    }

    /// A call sent and not yet answered. Calls are answered in order and all have the same
    /// timeout, so the timed-out calls are always a prefix of the queue.
    struct PendingCall {
        let id: UInt
        let sentAt: Instant
        let deadline: Instant
        /// `nil` once the call timed out (its late reply is dropped).
        var completion: Completion?
    }

    /// An outage: since when calls have been failing, and how many.
    struct Outage {
        let since: Instant
        var failedCalls: Int
    }

    let endpoint: RedisEndpoint
    let loop: SluiceLoop
    let timeout: Duration
    let connectTimeout: Duration
    let stallLimit: Duration
    let logger: Logger
    /// The availability hook (see ``RedisConnection/onAvailabilityChange``).
    let availabilityHandler = Mutex<(@Sendable (Bool) -> Void)?>(nil)
    private let timeoutFailures: Counter
    private let unavailableFailures: Counter

    // MARK: Loop-only state

    private var phase = Phase.idle
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    /// Counts contexts, so that a timer armed for one never acts on the next.
    private var generation: UInt64 = 0
    private var calls = Deque<PendingCall>()
    private var timedOutPrefix = 0
    private var nextCallID: UInt = 1
    private var callTimer: LoopTimer?
    private var callTimerDeadline: Instant?
    /// The connect deadline while connecting, the reconnect delay while waiting.
    private var phaseTimer: LoopTimer?
    private var reconnectAttempt = 0
    /// The jitter of reconnects.
    private var jitter = SplitMix64()
    private var outage: Outage?
    private var registeredForShutdown = false

    /// The first reconnect delay, doubled per failed attempt up to ``maximumBackoff``.
    static let initialBackoff = Duration.milliseconds(25)
    /// The longest reconnect delay.
    static let maximumBackoff = Duration.seconds(1)

    init(endpoint: RedisEndpoint, loop: SluiceLoop, timeout: Duration, connectTimeout: Duration, logger: Logger) {
        self.endpoint = endpoint
        self.loop = loop
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.stallLimit = max(timeout * 5, .seconds(1))
        var logger = logger
        logger[metadataKey: "redis"] = "\(endpoint)"
        self.logger = logger
        timeoutFailures = Counter(label: "sluice_store_failures_total", dimensions: [("reason", "timeout")])
        unavailableFailures = Counter(label: "sluice_store_failures_total", dimensions: [("reason", "unavailable")])
    }

    var isConnected: Bool {
        loop.assertInEventLoop()
        return phase == .connected
    }

    // MARK: Start and close

    func start() {
        loop.assertInEventLoop()
        guard phase == .idle else { return }
        phase = .waiting
        registeredForShutdown = true
        // A loop that is already closing its resources closes this one at once.
        loop.registerForShutdown(self)
        guard phase != .closed else { return }
        connect()
    }

    func close() {
        loop.assertInEventLoop()
        guard phase != .closed else { return }
        let wasAvailable = phase == .connected
        phase = .closed
        phaseTimer?.cancel()
        phaseTimer = nil
        if registeredForShutdown {
            registeredForShutdown = false
            loop.unregisterForShutdown(self)
        }
        var failed: [Completion] = []
        if let current = context {
            context = nil
            failed = takeLiveCalls()
            freeContext(current)
        }
        logger.debug("Redis connection closed")
        if wasAvailable { notifyAvailability(false) }
        fail(failed, .unavailable, "the connection to \(endpoint) was closed before the reply")
    }

    func closeForShutdown() {
        close()
    }

    // MARK: Calls

    func send(_ arguments: [[UInt8]], completion: @escaping Completion) {
        loop.assertInEventLoop()
        guard phase == .connected, let current = context else {
            fail([completion], .unavailable, "not connected to \(endpoint)")
            return
        }
        if let refusal = Self.refusal(of: arguments) {
            completion(.failure(RedisCallError(code: .invalidCommand, message: refusal)))
            return
        }
        let id = nextCallID
        nextCallID = nextCallID == UInt(bitPattern: -1) ? 1 : nextCallID + 1
        let status = Self.append(arguments, to: current, callback: redisReplyCallback, privdata: UnsafeMutableRawPointer(bitPattern: id))
        guard status == REDIS_OK else {
            // hiredis refuses new commands on a context that is disconnecting or being freed.
            fail([completion], .unavailable, "the connection to \(endpoint) is closing")
            return
        }
        let now = SluiceLoop.monotonicNow()
        calls.append(PendingCall(id: id, sentAt: now, deadline: now + timeout, completion: completion))
        armCallTimer()
    }

    /// Why a command is refused before it is sent, or `nil`.
    private static func refusal(of arguments: [[UInt8]]) -> String? {
        guard let verb = arguments.first else { return "an empty command" }
        guard arguments.count <= Int(Int32.max) else { return "too many arguments" }
        let name = String(decoding: verb, as: UTF8.self).uppercased()
        switch name {
        case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR",
            "RESET", "HELLO", "SELECT", "SYNC", "PSYNC":
            return "\(name) would change the connection itself; it is not supported here"
        case "CLIENT":
            if arguments.count > 1, String(decoding: arguments[1], as: UTF8.self).uppercased() == "REPLY" {
                return "CLIENT REPLY would unpair replies and calls; it is not supported here"
            }
            return nil
        default:
            return nil
        }
    }

    /// Appends a command to the context's output buffer with `redisAsyncCommandArgv`.
    private static func append(
        _ arguments: [[UInt8]], to context: UnsafeMutablePointer<redisAsyncContext>,
        callback: @escaping @convention(c) (UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void,
        privdata: UnsafeMutableRawPointer?
    ) -> Int32 {
        var flat: [UInt8] = []
        flat.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        var offsets: [Int] = []
        offsets.reserveCapacity(arguments.count)
        for argument in arguments {
            offsets.append(flat.count)
            flat.append(contentsOf: argument)
        }
        // Never empty, so the buffer always has a base address (every argument may be empty).
        flat.append(0)
        let lengths = arguments.map(\.count)
        return flat.withUnsafeBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return REDIS_ERR }
            let raw = UnsafeRawPointer(base)
            var pointers = offsets.map { Optional((raw + $0).assumingMemoryBound(to: CChar.self)) }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    redisAsyncCommandArgv(context, callback, privdata, Int32(arguments.count), argv.baseAddress, argvlen.baseAddress)
                }
            }
        }
    }

    /// A reply (or, with `nil`, hiredis failing the call as it frees the context) for call `id`.
    fileprivate func received(_ reply: UnsafeMutablePointer<redisReply>?, id: UInt, on ac: UnsafeMutablePointer<redisAsyncContext>) {
        guard ac == context else { return }
        guard let reply else {
            detach(ac, reason: Self.errorText(ac, otherwise: "connection lost"), free: false)
            return
        }
        guard let head = calls.first, head.id == id else {
            logger.error("Redis reply does not match the oldest call; dropping the connection")
            detach(ac, reason: "a reply did not match its call", free: true)
            return
        }
        calls.removeFirst()
        if timedOutPrefix > 0 {
            // Its caller was told `.timeout` already: drop the late reply.
            timedOutPrefix -= 1
            return
        }
        head.completion?(.success(RedisReply(copying: reply)))
    }

    // MARK: Timeouts

    /// Makes sure a timer will fire by the earliest deadline of a live call and by the moment
    /// the oldest call has been waiting for ``stallLimit``. One timer serves every call: a
    /// timer that fires before its time only re-arms.
    private func armCallTimer() {
        guard phase == .connected, let oldest = calls.first else { return }
        var wake = oldest.sentAt + stallLimit
        if timedOutPrefix < calls.count {
            wake = min(wake, calls[timedOutPrefix].deadline)
        }
        if let armed = callTimerDeadline, armed <= wake { return }
        callTimer?.cancel()
        let generation = generation
        callTimerDeadline = wake
        callTimer = loop.schedule(at: wake) { [weak self] in
            self?.callTimerFired(generation: generation)
        }
    }

    private func callTimerFired(generation firedFor: UInt64) {
        callTimer = nil
        callTimerDeadline = nil
        guard firedFor == generation, phase == .connected else { return }
        let now = SluiceLoop.monotonicNow()
        var expired: [Completion] = []
        while timedOutPrefix < calls.count, calls[timedOutPrefix].deadline <= now {
            if let completion = calls[timedOutPrefix].completion {
                expired.append(completion)
            }
            calls[timedOutPrefix].completion = nil
            timedOutPrefix += 1
        }
        fail(expired, .timeout, "no reply from \(endpoint) within \(timeout)")
        // The completions may have closed the connection or sent more calls.
        guard firedFor == generation, phase == .connected, let current = context else { return }
        if let oldest = calls.first, oldest.sentAt + stallLimit <= SluiceLoop.monotonicNow() {
            detach(current, reason: "no reply for \(stallLimit): the server is stalled or unreachable", free: true)
            return
        }
        armCallTimer()
    }

    // MARK: Connecting

    private func connect() {
        generation &+= 1
        let reason: String
        if let ac = redisAsyncConnect(endpoint.host, Int32(endpoint.port)) {
            if ac.pointee.err == 0, sluice_redis_libevent_attach(ac, loop.base) == REDIS_OK {
                // hiredis opens its socket without close-on-exec: a child process the embedding
                // server spawns must not inherit it (and keep it registered with the loop's
                // epoll set after this process closes it).
                _ = fcntl(ac.pointee.c.fd, F_SETFD, FD_CLOEXEC)
                ac.pointee.data = Unmanaged.passRetained(self).toOpaque()
                redisAsyncSetConnectCallback(ac, redisConnectCallback)
                redisAsyncSetDisconnectCallback(ac, redisDisconnectCallback)
                context = ac
                phase = .connecting
                let generation = generation
                phaseTimer = loop.schedule(after: connectTimeout) { [weak self] in
                    self?.connectDeadlinePassed(generation: generation)
                }
                return
            }
            reason = Self.errorText(ac, otherwise: "cannot attach to the event loop")
            // Not connected, nothing pending, no disconnect callback: freed at once.
            redisAsyncFree(ac)
        } else {
            reason = "cannot allocate a hiredis context"
        }
        beginOutage(reason: reason, wasAvailable: false)
        scheduleReconnect()
    }

    /// The connect callback: the TCP connection is up, or failed (and hiredis frees the context
    /// when this returns).
    fileprivate func connectFinished(_ ac: UnsafeMutablePointer<redisAsyncContext>, ok: Bool) {
        guard ac == context else { return }
        guard ok else {
            detach(ac, reason: Self.errorText(ac, otherwise: "connect failed"), free: false)
            return
        }
        phase = .handshaking
        // SELECT goes first, before any call: calls are refused until its reply. A failure to
        // append (hiredis out of memory) is left to the connect deadline.
        _ = Self.append(
            [Array("SELECT".utf8), Array(String(endpoint.database).utf8)], to: ac, callback: redisHandshakeCallback,
            privdata: nil)
    }

    /// The reply to `SELECT`.
    fileprivate func handshakeFinished(_ reply: UnsafeMutablePointer<redisReply>?, on ac: UnsafeMutablePointer<redisAsyncContext>) {
        guard ac == context else { return }
        guard let reply else {
            detach(ac, reason: Self.errorText(ac, otherwise: "connection lost"), free: false)
            return
        }
        let answer = RedisReply(copying: reply)
        guard answer.isOK else {
            detach(ac, reason: "SELECT \(endpoint.database) answered \(answer)", free: true)
            return
        }
        phaseTimer?.cancel()
        phaseTimer = nil
        phase = .connected
        reconnectAttempt = 0
        if let outage {
            self.outage = nil
            let down = SluiceLoop.monotonicNow() - outage.since
            logger.info(
                "Redis available again",
                metadata: [
                    "unavailable_ms": "\(down.nanosecondsClamped / 1_000_000)",
                    "failed_calls": "\(outage.failedCalls)",
                ])
        } else {
            logger.info("connected to Redis")
        }
        notifyAvailability(true)
    }

    /// The disconnect callback: hiredis frees the context when this returns.
    fileprivate func disconnected(_ ac: UnsafeMutablePointer<redisAsyncContext>, ok: Bool) {
        guard ac == context else { return }
        detach(ac, reason: ok ? "disconnected" : Self.errorText(ac, otherwise: "connection lost"), free: false)
    }

    private func connectDeadlinePassed(generation firedFor: UInt64) {
        guard firedFor == generation, phase == .connecting || phase == .handshaking, let current = context else { return }
        phaseTimer = nil
        detach(current, reason: "no connection within \(connectTimeout)", free: true)
    }

    // MARK: Losing a context

    /// Gives up the current context: fails its live calls with `.unavailable`, reports the
    /// outage, schedules a reconnect and, with `free`, frees the context (else hiredis is
    /// freeing it already). User code runs last, once the state is consistent.
    private func detach(_ ac: UnsafeMutablePointer<redisAsyncContext>, reason: String, free: Bool) {
        let wasAvailable = phase == .connected
        context = nil
        phaseTimer?.cancel()
        phaseTimer = nil
        let failed = takeLiveCalls()
        beginOutage(reason: reason, wasAvailable: wasAvailable)
        phase = .waiting
        scheduleReconnect()
        if free { freeContext(ac) }
        if wasAvailable { notifyAvailability(false) }
        fail(failed, .unavailable, "the connection to \(endpoint) was lost before the reply (\(reason))")
    }

    /// Frees a context the core has detached. hiredis runs the pending callbacks (ignored: the
    /// context is no longer current) and, for a connected context, the disconnect callback,
    /// which drops the context's reference to the core; for one that never connected the core
    /// drops it here.
    private func freeContext(_ ac: UnsafeMutablePointer<redisAsyncContext>) {
        withExtendedLifetime(self) {
            let connected = sluice_redis_is_connected(ac) != 0
            let data = ac.pointee.data
            redisAsyncFree(ac)
            if !connected, let data {
                Unmanaged<RedisConnectionCore>.fromOpaque(data).release()
            }
        }
    }

    /// Removes every queued call; returns the completions of those that had not timed out.
    private func takeLiveCalls() -> [Completion] {
        let live = calls.dropFirst(timedOutPrefix).compactMap(\.completion)
        calls.removeAll()
        timedOutPrefix = 0
        callTimer?.cancel()
        callTimer = nil
        callTimerDeadline = nil
        return live
    }

    private func beginOutage(reason: String, wasAvailable: Bool) {
        guard outage == nil else { return }
        outage = Outage(since: SluiceLoop.monotonicNow(), failedCalls: 0)
        logger.warning(
            wasAvailable ? "lost the connection to Redis; reconnecting" : "cannot connect to Redis; retrying",
            metadata: ["reason": "\(reason)"])
    }

    private func scheduleReconnect() {
        guard phase == .waiting else { return }
        let exponent = min(reconnectAttempt, 16)
        reconnectAttempt += 1
        let ceiling = min(Self.initialBackoff * (1 << exponent), Self.maximumBackoff)
        // Equal jitter: half the delay fixed, half random, so that many connections losing the
        // same server do not come back in step.
        let half = ceiling.nanosecondsClamped / 2
        let delay = Duration.nanoseconds(half + Int64.random(in: 0...max(0, half), using: &jitter))
        let generation = generation
        phaseTimer?.cancel()
        phaseTimer = loop.schedule(after: delay) { [weak self] in
            self?.reconnectDue(generation: generation)
        }
    }

    private func reconnectDue(generation firedFor: UInt64) {
        guard firedFor == generation, phase == .waiting else { return }
        phaseTimer = nil
        connect()
    }

    // MARK: Reporting

    /// Fails `completions` with `code` (`.unavailable` or `.timeout`), counting each.
    private func fail(_ completions: [Completion], _ code: RedisCallError.Code, _ message: String) {
        guard !completions.isEmpty else { return }
        if code == .unavailable {
            outage?.failedCalls += completions.count
        }
        let error = RedisCallError(code: code, message: message)
        let counter = code == .timeout ? timeoutFailures : unavailableFailures
        for completion in completions {
            counter.increment()
            completion(.failure(error))
        }
    }

    private func notifyAvailability(_ available: Bool) {
        let handler = availabilityHandler.withSanitizedLock { $0 }
        handler?(available)
    }

    private static func errorText(_ ac: UnsafeMutablePointer<redisAsyncContext>, otherwise fallback: String) -> String {
        guard let text = sluice_redis_error_text(ac) else { return fallback }
        return String(cString: text)
    }
}

// MARK: - hiredis callbacks

/// The core an async context belongs to (unretained: the context holds a reference).
private func core(of ac: UnsafePointer<redisAsyncContext>) -> RedisConnectionCore? {
    guard let data = ac.pointee.data else { return nil }
    return Unmanaged<RedisConnectionCore>.fromOpaque(data).takeUnretainedValue()
}

private func redisConnectCallback(_ ac: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let ac, let core = core(of: ac) else { return }
    let context = UnsafeMutablePointer(mutating: ac)
    core.connectFinished(context, ok: status == REDIS_OK)
    if status != REDIS_OK, let data = ac.pointee.data {
        // hiredis frees a context whose connect failed without a disconnect callback.
        Unmanaged<RedisConnectionCore>.fromOpaque(data).release()
    }
}

private func redisDisconnectCallback(_ ac: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let ac, let core = core(of: ac) else { return }
    core.disconnected(UnsafeMutablePointer(mutating: ac), ok: status == REDIS_OK)
    if let data = ac.pointee.data {
        // The last callback for this context: hiredis frees it when this returns.
        Unmanaged<RedisConnectionCore>.fromOpaque(data).release()
    }
}

private func redisReplyCallback(
    _ ac: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?, _ privdata: UnsafeMutableRawPointer?
) {
    guard let ac, let core = core(of: ac) else { return }
    core.received(reply?.assumingMemoryBound(to: redisReply.self), id: UInt(bitPattern: privdata), on: ac)
}

private func redisHandshakeCallback(
    _ ac: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?, _ privdata: UnsafeMutableRawPointer?
) {
    guard let ac, let core = core(of: ac) else { return }
    core.handshakeFinished(reply?.assumingMemoryBound(to: redisReply.self), on: ac)
}
