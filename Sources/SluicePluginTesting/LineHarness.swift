import Sluice
import SluiceLibevent
import SluiceLineProtocol
import Synchronization

/// A line-protocol server without sockets, on a manual clock: for testing line codecs (yours
/// too) through the same session code the server runs.
///
/// ```swift
/// var plugins = PluginRegistry()
/// let tap = try plugins.register(ButtonTapPlugin(window: .seconds(1)))
/// var verbs = LineVerbs()
/// try verbs.register(TapLineCodec(tap.plugin), for: tap)
/// let harness = try LineHarness(plugins: plugins, verbs: verbs)
/// let client = await harness.connect()
/// #expect(await client.request("1 TAP k") == "1 OK tap=1")
/// await harness.advance(by: .milliseconds(999))
/// #expect(await client.request("2 TAP k") == "2 THROTTLED retry-after-ms=1")
/// harness.shutdown()
/// ```
public final class LineHarness: Sendable {
    /// The clock every shard reads; only ``advance(by:)`` moves it.
    public let clock: ManualGateClock
    /// The gate behind the server.
    public let gate: Gate
    /// The server whose sessions the clients use (never bound to a port).
    public let server: LineServer
    private let group: SluiceLoopGroup
    private let nextClientID = Atomic<UInt64>(0)
    /// Every client connected, so that shutting down can release their sessions.
    private let clients = Mutex<[HarnessClient]>([])

    /// A harness with one loop running `plugins`, answering `verbs`.
    public init(
        plugins: PluginRegistry, verbs: LineVerbs, configuration: LineConfiguration = LineConfiguration(),
        options: GateOptions = GateOptions()
    ) throws {
        let clock = ManualGateClock()
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "line-harness")
        do {
            gate = try Gate(group: group, plugins: plugins, options: options, clock: clock.clock(for:))
            server = try LineServer(gate: gate, verbs: verbs, configuration: configuration)
        } catch {
            group.shutdownGracefully()
            throw error
        }
        self.clock = clock
        self.group = group
    }

    /// Opens a client session.
    public func connect() async -> HarnessClient {
        let id = nextClientID.wrappingAdd(1, ordering: .relaxed).newValue
        let client = HarnessClient(loop: group.loops[0], id: id)
        let session = server.makeSession(transport: client)
        client.attach(session)
        clients.withSanitizedLock { $0.append(client) }
        await client.loop.submit { session.opened() }
        return client
    }

    /// Moves the clock forward, running the timers that come due (and the effects they wake).
    public func advance(by duration: Duration) async {
        await clock.advance(by: duration)
    }

    /// Stops the loops (without draining the gate: what still runs is dropped with them; call
    /// `Gate/shutdown(gracePeriod:)` first to test a drain). Call once, from outside the loops.
    public func shutdown() {
        // Sessions close first, from jobs the loop runs before it stops: a client and its
        // session hold each other, and a request still waiting holds its session.
        for client in clients.withSanitizedLock({ $0 }) { client.closeOnShutdown() }
        group.shutdownGracefully()
        clock.cancelAll()
    }
}

/// A client of a ``LineHarness``: sends request lines and collects the reply lines.
public final class HarnessClient: SessionTransport, Sendable {
    public let loop: SluiceLoop
    public let id: UInt64
    private let session = Mutex<LineSession?>(nil)
    private let replies = Mutex<[String]>([])
    private let closedFlag = Atomic<Bool>(false)

    init(loop: SluiceLoop, id: UInt64) {
        self.loop = loop
        self.id = id
    }

    func attach(_ session: LineSession) {
        self.session.withSanitizedLock { $0 = session }
    }

    /// Lets the session go, returning it unless it was let go already: each way of closing
    /// closes it once.
    private func takeSession() -> LineSession? {
        session.withSanitizedLock { state in
            defer { state = nil }
            return state
        }
    }

    /// Closes the session from a job on its loop (run before the loop stops) and lets it go:
    /// its scope closes, so its requests still waiting are answered and release what they hold.
    func closeOnShutdown() {
        guard let session = takeSession() else { return }
        _ = loop.executeIfRunning { session.closed() }
    }

    /// Sends one request line (no LF) and lets the loop run what it started.
    public func send(_ line: String) async {
        guard let session = session.withSanitizedLock({ $0 }) else { return }
        await loop.submit {
            var line = line
            line.withUTF8 { session.received(line: UnsafeRawBufferPointer($0)) }
        }
        for _ in 0..<4 { await loop.submit {} }
    }

    /// Sends one request line and returns the reply to its id, if one came at once.
    public func request(_ line: String) async -> String? {
        await send(line)
        let id = line.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
        return takeReply(to: id)
    }

    /// Removes and returns every reply received so far, in arrival order.
    public func takeReplies() -> [String] {
        replies.withSanitizedLock { replies in
            defer { replies.removeAll() }
            return replies
        }
    }

    /// Removes and returns the first reply whose id is `id`.
    public func takeReply(to id: String) -> String? {
        replies.withSanitizedLock { replies in
            guard let index = replies.firstIndex(where: { $0.hasPrefix(id + " ") }) else { return nil }
            return replies.remove(at: index)
        }
    }

    /// Waits (in loop round trips, not time) for the reply to `id`: for replies that come once
    /// a cancelled task has unwound. Returns `nil` if none came within `rounds` round trips.
    public func waitForReply(to id: String, rounds: Int = 1_000) async -> String? {
        for _ in 0..<rounds {
            if let reply = takeReply(to: id) { return reply }
            await loop.submit {}
        }
        return takeReply(to: id)
    }

    /// Closes the session (its scope closes: what its requests wait for is cancelled).
    public func close() async {
        guard let session = takeSession() else { return }
        closedFlag.store(true, ordering: .releasing)
        await loop.submit { session.closed() }
        for _ in 0..<4 { await loop.submit {} }
    }

    /// Whether the session asked to close (after a half-close) or was closed.
    public var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !isClosed else { return false }
        let text = String(decoding: bytes, as: UTF8.self)
        replies.withSanitizedLock { replies in
            for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
                replies.append(String(line))
            }
        }
        return true
    }

    public func closeAfterFlush() {
        closedFlag.store(true, ordering: .releasing)
        takeSession()?.closed()
    }
}
