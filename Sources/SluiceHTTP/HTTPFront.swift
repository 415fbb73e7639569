import HTTPTypes
import Logging
import Metrics
import ServiceLifecycle
import Sluice
import SluiceFronts
import SluiceLibevent

/// The HTTP/1.1 front: Sluice's own server on the gate's loops (a listener per loop, sharing
/// the port; each connection a bounded `TCPConnection` read by a strict
/// `HTTPRequestParser`), routing each request through its `HTTPCodec` to the gate, and
/// answering `/echo` (limited per connection), `/metrics` (Prometheus text, from the renderer it
/// is given) and `/healthz` (503 while the gate drains) itself. Every error is an RFC 9457
/// problem; every answer carries `Date`, and `Connection: close` when the connection closes.
///
/// Run it as a swift-service-lifecycle `Service` after the `Gate` in the same `ServiceGroup`:
/// on a graceful shutdown it stops accepting; the gate then drains, and open connections get
/// 503 (and are closed) for new requests while it does.
public final class HTTPFront: Service, Sendable {
    /// The gate the routes go to.
    public let gate: Gate
    /// The plugin routes.
    public let routes: HTTPRoutes
    /// The configuration.
    public let configuration: HTTPFrontConfiguration
    let echoOptions: RateLimitOptions
    let echoFields: RateLimitFields
    private let renderMetrics: (@Sendable () -> [UInt8])?
    private let accounting: ConnectionAccounting?
    private let logger: Logger
    private let onBound: @Sendable (Int) async -> Void
    /// The bound server, the open connections and the requests received.
    let listener = FrontListener(requestsLabel: "sluice_http_requests_total", connectionsLabel: "sluice_http_connections")

    /// Creates a front; ``run()`` (or ``start()``) binds it.
    ///
    /// - Parameters:
    ///   - gate: the gate the routes go to; the front listens on its loops.
    ///   - routes: the plugin routes, each with its codec.
    ///   - configuration: the address, caps, timeouts and the `/echo` limit.
    ///   - accounting: the connection cap shared with other fronts (the line front); `nil` for
    ///     a cap of this front's own.
    ///   - metrics: renders the process's metrics as Prometheus text for `GET /metrics`
    ///     (404 without it).
    ///   - logger: where the front logs.
    ///   - onBound: called with the bound port once the front listens.
    /// - Throws: `SluiceError` for a bad configuration.
    public init(
        gate: Gate,
        routes: HTTPRoutes,
        configuration: HTTPFrontConfiguration = HTTPFrontConfiguration(),
        accounting: ConnectionAccounting? = nil,
        metrics: (@Sendable () -> [UInt8])? = nil,
        logger: Logger = Logger(label: "sluice.http"),
        onBound: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws(SluiceError) {
        try configuration.validate()
        self.gate = gate
        self.routes = routes
        self.configuration = configuration
        self.echoOptions = try configuration.echoLimit()
        self.echoFields = RateLimitFields.gcra(name: "echo", options: echoOptions)
        self.renderMetrics = metrics
        self.accounting = accounting
        self.logger = logger
        self.onBound = onBound
    }

    // MARK: - Running

    /// Binds a listener on every loop of the gate's group; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        let server = try await TCPServer.bind(
            group: gate.group, configuration: configuration.http.tcp, refusal: { Self.refusal() }, accounting: accounting,
            logger: logger
        ) { [self] connection in
            HTTPSession(front: self, connection: connection)
        }
        listener.listening(on: server)
        logger.info(
            "listening (HTTP)",
            metadata: [
                "host": "\(configuration.http.host)", "port": "\(server.port)", "loops": "\(gate.group.loops.count)",
                "routes": "\(routes.descriptions.joined(separator: ","))",
            ])
        return server.port
    }

    /// What a connection over the cap gets before it is closed: 503, a problem.
    static func refusal() -> [UInt8] {
        var date = HTTPDate()
        date.update()
        var bytes: [UInt8] = []
        let problem = HTTPProblem(.serviceUnavailable, "too-many-connections", detail: "the server has no room for another connection")
        var answer = problem.answer
        answer.fields[.retryAfter] = "1"
        HTTPResponseWriter.render(answer, context: HTTPAnswerContext(isHead: false, close: true, keepAliveHTTP10: false), date: date.bytes, into: &bytes)
        return bytes
    }

    /// Stops accepting connections; open ones stay open.
    public func stopAccepting() async {
        await listener.stopAccepting()
    }

    /// The swift-service-lifecycle entry point: listen, wait for a graceful shutdown, stop
    /// accepting.
    public func run() async throws {
        try await listener.run(start: start, onBound: onBound, logger: logger, stopped: "no longer accepting HTTP connections")
    }

    /// The number of open connections.
    public var connectionCount: Int { listener.connectionCount }

    /// When the front last received a request (see `RequestActivity`).
    public var activity: RequestActivity { listener.activity }

    /// `/healthz`: 200 while the gate takes requests, 503 once it drains.
    func health() -> HTTPAnswer {
        if gate.isAcceptingRequests { return .json(.ok, Array(#"{"status":"ok"}"#.utf8)) }
        return .json(.serviceUnavailable, Array(#"{"status":"draining"}"#.utf8))
    }

    /// `/metrics`: the gate's gauges brought up to date (keys per plugin table, executions
    /// held or running, requests waiting) and its counters reported (``Gate/statistics()``
    /// reports the decisions and evictions counted since the last sweep), then the renderer's
    /// text.
    func metrics() async -> HTTPAnswer {
        guard let renderMetrics else {
            return HTTPProblem(.notFound, "not-found", detail: "this server exports no metrics").answer
        }
        let statistics = await gate.statistics()
        for (plugin, keys) in statistics.keysByPlugin {
            Gauge(label: "sluice_keys", dimensions: [("plugin", plugin)]).record(keys)
        }
        Gauge(label: "sluice_effects_in_flight").record(statistics.executions)
        Gauge(label: "sluice_requests_waiting").record(statistics.waiters)
        var fields = HTTPFields()
        fields[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return HTTPAnswer(status: .ok, fields: fields, body: renderMetrics())
    }
}
