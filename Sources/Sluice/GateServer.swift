import Logging
import Metrics
import ServiceLifecycle
import SluiceCore
import SluiceLibevent
import Synchronization

/// The Sluice server: a line-protocol TCP server on a loop group, with one ``GateShard`` per
/// loop and the registered plugins behind it.
///
/// It answers `PING`, `ECHO` (rate-limited per connection), `CANCEL` and `STATS` itself and
/// routes every other verb to its plugin. Run it as a swift-service-lifecycle `Service`: a
/// graceful shutdown stops accepting, answers new requests `ERR shutting-down`, lets running
/// effects finish (up to the grace period) and joins the loops.
public final class GateServer: Service, Sendable {
    /// The loops.
    public let group: EventLoopGroup
    /// The configuration.
    public let configuration: GateConfiguration
    /// One shard per loop, in the group's order.
    public let shards: [GateShard]
    let plugins: [RegisteredPlugin]
    let echoLimit: RateLimitOptions
    let statistics = GateStatistics()
    private let logger: Logger
    private let openConnections = Atomic<Int>(0)
    private let draining = Atomic<Bool>(false)
    private let bound = Mutex<TCPServer?>(nil)
    private let onBound: @Sendable (Int) async -> Void
    private let requestCounter: Counter

    /// Creates a server; ``run()`` binds it.
    ///
    /// - Parameters:
    ///   - clock: makes each shard's clock from its loop (tests pass a manual one).
    ///   - onBound: called with the bound port once the server listens.
    /// - Throws: ``GateError`` for a bad configuration or a plugin budget too small for a table.
    public init(
        group: EventLoopGroup,
        configuration: GateConfiguration,
        plugins: PluginRegistry,
        logger: Logger = Logger(label: "sluice"),
        clock: @Sendable (EventLoop) -> any GateClock = { LoopGateClock(loop: $0) },
        onBound: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws(GateError) {
        try configuration.validate()
        self.group = group
        self.configuration = configuration
        self.plugins = plugins.plugins
        self.echoLimit = try configuration.echoLimit()
        self.logger = logger
        self.onBound = onBound
        self.requestCounter = Counter(label: "sluice_requests_total")
        let statistics = self.statistics
        do {
            self.shards = try group.loops.map { loop throws(SluiceError) in
                try GateShard(
                    loop: loop, clock: clock(loop), plugins: plugins.plugins, statistics: statistics,
                    shardCount: group.loops.count)
            }
        } catch {
            throw GateError(code: .invalidConfiguration, message: error.message, value: error.value)
        }
    }

    // MARK: - Running

    /// Binds the listeners and starts the shards' sweeps; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        for shard in shards {
            await shard.loop.submit { shard.assumeIsolated { $0.startSweeping() } }
        }
        let server = try await TCPServer.bind(group: group, configuration: configuration.tcp) { [self] connection in
            GateSession(server: self, connection: connection)
        }
        bound.withLock { $0 = server }
        logger.info(
            "listening",
            metadata: [
                "host": "\(configuration.tcp.host)", "port": "\(server.port)", "loops": "\(group.loops.count)",
                "plugins": "\(plugins.map(\.name).joined(separator: ","))",
            ])
        return server.port
    }

    /// Stops accepting, answers new requests `ERR shutting-down`, and waits up to the grace
    /// period for running effects to end. The loops keep running; shut the group down after.
    public func drain() async {
        draining.store(true, ordering: .releasing)
        if let server = bound.withLock({ $0 }) {
            await server.stopAccepting()
        }
        let deadline = ContinuousClock.now + configuration.shutdownGracePeriod
        while await runningEffects() > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        for shard in shards {
            await shard.loop.submit { shard.assumeIsolated { $0.stopSweeping() } }
        }
    }

    /// The swift-service-lifecycle entry point: start, wait for a graceful shutdown, drain, and
    /// join the loops.
    public func run() async throws {
        do {
            let port = try await start()
            await onBound(port)
        } catch {
            group.shutdownGracefully()
            throw error
        }
        try? await gracefulShutdown()
        logger.info("shutting down")
        await drain()
        group.shutdownGracefully()
        logger.info("stopped")
    }

    /// A protocol session over another transport (tests, embedding): feed it lines on the
    /// transport's loop. Call ``GateSession/opened()`` first and ``GateSession/closed()`` last.
    public func makeSession(transport: any SessionTransport) -> GateSession {
        GateSession(server: self, connection: transport)
    }

    // MARK: - State shared with the connections

    /// Whether a graceful shutdown has begun.
    var isDraining: Bool { draining.load(ordering: .acquiring) }

    /// The shard that owns `key`.
    func shard(for key: String) -> GateShard {
        shards[group.loopIndex(forKeyHash: UInt64(bitPattern: Int64(key.hashValue)))]
    }

    func connectionOpened() {
        openConnections.add(1, ordering: .relaxed)
    }

    func connectionClosed(_ connectionID: UInt64) {
        openConnections.subtract(1, ordering: .relaxed)
        for shard in shards {
            shard.loop.executeIfRunning {
                shard.assumeIsolated { $0.connectionClosed(connectionID) }
            }
        }
    }

    func countRequest() {
        requestCounter.increment()
    }

    /// The number of open connections.
    public var connectionCount: Int { openConnections.load(ordering: .relaxed) }

    /// Effects registered and not yet ended, over all shards.
    public func runningEffects() async -> Int {
        var total = 0
        for shard in shards { total += await shard.effectCount() }
        return total
    }

    /// The `STATS` line's details: every plugin counter in registration order, then
    /// `cancelled`, `keys` and `connections`.
    public func statisticsLine() async -> String {
        var keys = 0
        for shard in shards { keys += await shard.keyCount() }
        var fields = plugins.flatMap(\.counters).map { "\($0.name)=\($0.current)" }
        fields.append("cancelled=\(statistics.cancelled.current)")
        fields.append("keys=\(keys)")
        fields.append("connections=\(connectionCount)")
        return fields.joined(separator: " ")
    }
}
