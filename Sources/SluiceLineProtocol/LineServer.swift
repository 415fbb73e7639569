import Logging
import ServiceLifecycle
import Sluice
import SluiceFronts
import SluiceLibevent

/// The line-protocol front: a TCP server on the gate's loops whose connections speak
/// `<id> <VERB> [<args>]`, with `PING`, `ECHO` (rate-limited per connection), `CANCEL` and
/// `STATS` answered here and every other verb routed to its plugin through its ``LineCodec``.
///
/// Run it as a swift-service-lifecycle `Service` after the `Gate` in the same `ServiceGroup`:
/// on a graceful shutdown it stops accepting; the gate then drains, and open connections get
/// `ERR shutting-down` for new requests while it does.
public final class LineServer: Service, Sendable {
    /// The gate the verbs go to.
    public let gate: Gate
    /// The configuration.
    public let configuration: LineConfiguration
    /// The plugin verbs.
    public let verbs: LineVerbs
    let echoLimit: RateLimitOptions
    let logger: Logger
    private let onBound: @Sendable (Int) async -> Void
    private let accounting: ConnectionAccounting?
    /// The bound server, the open sessions and the requests received.
    let listener = FrontListener(requestsLabel: "sluice_line_requests_total", connectionsLabel: "sluice_line_connections")

    /// Creates a server; ``run()`` (or ``start()``) binds it.
    ///
    /// - Parameters:
    ///   - gate: the gate the plugin verbs go to; the server listens on its loops.
    ///   - verbs: the plugin verbs it answers, each with its codec.
    ///   - configuration: the TCP settings, the in-flight cap and the `ECHO` limit.
    ///   - accounting: the connection cap shared with other fronts of the process (the HTTP
    ///     front, say); `nil` for a cap of this server's own (``LineConfiguration/tcp``).
    ///   - logger: where the server logs.
    ///   - onBound: called with the bound port once the server listens.
    /// - Throws: `SluiceError` for a bad configuration.
    public init(
        gate: Gate,
        verbs: LineVerbs,
        configuration: LineConfiguration = LineConfiguration(),
        accounting: ConnectionAccounting? = nil,
        logger: Logger = Logger(label: "sluice.line"),
        onBound: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws(SluiceError) {
        try configuration.validate()
        self.gate = gate
        self.verbs = verbs
        self.configuration = configuration
        self.echoLimit = try configuration.echoLimit()
        self.logger = logger
        self.onBound = onBound
        self.accounting = accounting
    }

    // MARK: - Running

    /// Binds a listener on every loop of the gate's group; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        let server = try await TCPServer.bind(
            group: gate.group, configuration: configuration.tcp, framing: configuration.framing, refusal: Array(Self.refusal.utf8), accounting: accounting,
            logger: logger
        ) { [self] connection in
            LineSession(server: self, connection: connection)
        }
        listener.listening(on: server)
        logger.info(
            "listening",
            metadata: [
                "host": "\(configuration.tcp.host)", "port": "\(server.port)", "loops": "\(gate.group.loops.count)",
                "verbs": "\(verbs.verbs.joined(separator: ","))",
            ])
        return server.port
    }

    /// Stops accepting connections; open ones stay open.
    public func stopAccepting() async {
        await listener.stopAccepting()
    }

    /// The swift-service-lifecycle entry point: listen, wait for a graceful shutdown, stop
    /// accepting.
    public func run() async throws {
        try await listener.run(start: start, onBound: onBound, logger: logger, stopped: "no longer accepting connections")
    }

    /// A protocol session over another transport (tests, embedding): feed it lines on the
    /// transport's loop. Call ``LineSession/opened()`` first and ``LineSession/closed()`` last.
    public func makeSession(transport: any SessionTransport) -> LineSession {
        LineSession(server: self, connection: transport)
    }

    /// When the front last received a request (see `RequestActivity`).
    public var activity: RequestActivity { listener.activity }

    /// What a connection over the cap reads before it is closed.
    static let refusal = "- ERR too-many-connections\n"

    /// The number of open sessions.
    public var connectionCount: Int { listener.connectionCount }

    /// The `STATS` line's details: every verb's counters in registration order, then
    /// `cancelled`, `evicted` (live keys evicted from policy tables, each possibly changing a
    /// decision), `keys` and `connections`.
    public func statisticsLine() async -> String {
        let statistics = await gate.statistics()
        var fields = verbs.routes.flatMap(\.counters).map { "\($0.name)=\($0.current)" }
        fields.append("cancelled=\(statistics.cancelled)")
        fields.append("evicted=\(statistics.evicted)")
        fields.append("keys=\(statistics.keys)")
        fields.append("connections=\(connectionCount)")
        return fields.joined(separator: " ")
    }
}
