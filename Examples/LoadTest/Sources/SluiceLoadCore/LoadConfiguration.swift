import SluiceCore
/// Everything that defines one `sluice-load` run, validated.
public struct LoadConfiguration: Sendable, Hashable {
    /// When the run stops sending.
    public enum Limit: Sendable, Hashable, CustomStringConvertible {
        /// Send for this long, then wait for the replies still in flight.
        case duration(Duration)
        /// Send this many requests in total, then wait for their replies.
        case requests(Int)

        public var description: String {
            switch self {
            case .duration(let duration): "duration \(duration)"
            case .requests(let count): "\(count) requests"
            }
        }
    }

    public var host: String = "127.0.0.1"
    /// The servers' ports, one per `sluice-echo` instance on ``host``: the line protocol's, or
    /// the HTTP front's with ``http``. Connection `i` goes to `ports[i % ports.count]` (see
    /// ``port(forConnection:)``); the `STATS` (HTTP: `GET /metrics`) probes are taken on every
    /// one, and the payment check sums their growth. Several instances share one store, so a
    /// (key, idem) pair is charged once over all of them.
    public var ports: [Int] = [7070]
    /// The first of ``ports`` (the only one, unless several instances are driven).
    public var port: Int { ports.first ?? 7070 }
    /// HTTP mode: the mix over HTTP/1.1 keep-alive connections to `sluice-echo`'s HTTP front
    /// (`POST /echo`, `POST /tap/<key>`, `POST /pay`, `GET /search/<key>?q=`), responses
    /// matched in order, the payment check against `GET /metrics`.
    public var http: Bool = false
    /// Connections, spread round-robin over ``loops`` client loops.
    public var connections: Int = 16
    /// Requests in flight per connection (closed loop). Ignored with ``rate`` in line mode. In
    /// HTTP mode the most requests on one connection's wire at once, closed or open loop: 1 is
    /// one request at a time, more pipelines (responses come back in order).
    public var depth: Int = 8
    public var limit: Limit = .duration(.seconds(10))
    public var mix: RequestMix = .standard
    /// Keys drawn from (TAP, PAY, SEARCH).
    public var keys: Int = 1000
    public var keyDistribution: KeyDistribution = .uniform
    /// Share of PAYs that reuse an earlier (key, idem, amount) sent by another connection.
    public var dupRatio: Double = 0
    /// Open loop: requests per second over all connections, latency measured from the intended
    /// send time. `nil`: closed loop with ``depth``.
    public var rate: Double?
    /// Raw echo mode: send bare lines of ``lineBytes`` bytes (LF included) to a server that
    /// echoes lines verbatim; replies are matched in order.
    public var rawEcho: Bool = false
    /// Verbatim echo mode: send protocol ECHO requests (`<id> ECHO <text>`) to a server that
    /// returns each line as it is; the reply `<id> ECHO <text>` counts as `<id> OK <text>`. The
    /// client then does the same work per line as against sluice-echo (ids, in-flight table,
    /// reply parsing), so a baseline server and sluice-echo are driven at the same pace.
    public var verbatimEcho: Bool = false
    /// Whether the server is an echo baseline (``rawEcho`` or ``verbatimEcho``): ECHO lines only,
    /// and no `STATS`.
    public var drivesEchoBaseline: Bool { rawEcho || verbatimEcho }
    /// Raw echo: bytes per line including the LF.
    public var lineBytes: Int = 64
    /// Bytes of ECHO text per request (protocol mode).
    public var echoBytes: Int = 16
    /// Client event loops (threads).
    public var loops: Int = 1
    /// How long to wait for replies still in flight after sending stops.
    public var drainTimeout: Duration = .seconds(5)
    /// Seed of the client's random choices (verbs, keys, duplicates).
    public var seed: UInt64 = 1

    public init() {}

    /// Checks every field; throws ``LoadError`` naming the first bad one.
    public func validate() throws(LoadError) {
        try validatePorts()
        if connections < 1 { throw LoadError("--connections must be at least 1", input: "\(connections)") }
        if depth < 1 { throw LoadError("--depth must be at least 1", input: "\(depth)") }
        if keys < 1 { throw LoadError("--keys must be at least 1", input: "\(keys)") }
        if !(0...1).contains(dupRatio) { throw LoadError("--dup-ratio must be between 0 and 1", input: "\(dupRatio)") }
        if let rate, !(rate.isFinite && rate > 0) { throw LoadError("--rate must be a positive number", input: "\(rate)") }
        if lineBytes < 2 { throw LoadError("--line-bytes must be at least 2 (one byte and the LF)", input: "\(lineBytes)") }
        if echoBytes < 1 { throw LoadError("--echo-bytes must be at least 1", input: "\(echoBytes)") }
        if loops < 1 { throw LoadError("--loops must be at least 1", input: "\(loops)") }
        if case .requests(let count) = limit, count < 1 {
            throw LoadError("--requests must be at least 1", input: "\(count)")
        }
        if http && drivesEchoBaseline {
            throw LoadError("--http drives sluice-echo's HTTP front; it excludes --raw-echo and --verbatim-echo", input: "--http")
        }
        if verbatimEcho && rawEcho {
            throw LoadError("--verbatim-echo and --raw-echo exclude each other", input: "--raw-echo")
        }
        if drivesEchoBaseline && (mix.includes(.tap) || mix.includes(.pay) || mix.includes(.search)) {
            let flag = rawEcho ? "--raw-echo sends bare lines" : "--verbatim-echo sends ECHO requests"
            throw LoadError("\(flag) only; drop --mix or use --mix echo=1", input: "\(mix)")
        }
    }

    /// The port connection `index` (`0..<connections`) goes to: round-robin over ``ports``.
    public func port(forConnection index: Int) -> Int {
        ports.isEmpty ? 7070 : ports[index % ports.count]
    }

    /// How many of the ``connections`` go to each of ``ports``, in the order of ``ports``.
    public var connectionsPerPort: [Int] {
        guard !ports.isEmpty else { return [] }
        return ports.indices.map { position in
            connections / ports.count + (position < connections % ports.count ? 1 : 0)
        }
    }

    /// ``ports``: at least one, each 1...65535 and listed once, and no more than
    /// ``connections`` (a port without a connection would be probed but never driven).
    private func validatePorts() throws(LoadError) {
        guard !ports.isEmpty else { throw LoadError("--port: at least one port", input: "") }
        var seen = Set<Int>()
        for port in ports {
            if !(1...65535).contains(port) { throw LoadError("--port must be 1...65535", input: "\(port)") }
            if !seen.insert(port).inserted { throw LoadError("--port: port listed twice", input: "\(port)") }
        }
        if connections >= 1 && connections < ports.count {
            throw LoadError(
                "--connections must be at least the number of ports (\(ports.count)), or port \(ports[connections]) gets no connection",
                input: "\(connections)")
        }
    }

    /// The interval between two intended sends on one connection in open-loop mode.
    public var openLoopInterval: Duration? {
        guard let rate else { return nil }
        return .nanoseconds(Int64((Double(connections) / rate * 1e9).rounded()))
    }
}
