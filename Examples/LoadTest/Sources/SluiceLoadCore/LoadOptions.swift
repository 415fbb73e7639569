import ArgumentParser

/// The command-line options of `sluice-load` (swift-argument-parser), turned into a
/// ``LoadConfiguration`` by ``configuration()``.
public struct LoadOptions: ParsableArguments {
    @Option(help: "Server address (an IP literal or localhost).")
    public var host = "127.0.0.1"

    @Option(help: ArgumentHelp(
        "Server port, or a comma-separated list of ports of sluice-echo instances sharing one store (default 7070; 8080, the HTTP front's, with --http).",
        discussion: "Connection i goes to the i-th port modulo their count. STATS (GET /metrics with --http) is read on every port before and after the run, and the payment check compares the charges summed over the instances with the pairs answered.",
        valueName: "port[,port...]"))
    public var port: String?

    @Flag(help: ArgumentHelp(
        "Drive sluice-echo's HTTP front: the same mix and checks over HTTP/1.1 keep-alive connections.",
        discussion: "ECHO is POST /echo, TAP POST /tap/<key>, PAY POST /pay (Idempotency-Key, JSON body), SEARCH GET /search/<key>?q=<query>. 2xx and the refusals (429, 409, 402, 503 busy) are counted by kind; any other 4xx/5xx, a malformed response or a connection lost with requests outstanding fails the run. The payment check reads sluice_payments_total and sluice_declines_total from GET /metrics."))
    public var http = false

    @Option(help: "TCP connections to open.")
    public var connections = 16

    @Option(help: ArgumentHelp(
        "Requests in flight per connection (default 8; 1 with --http).",
        discussion: "Line protocol: closed loop only, ignored with --rate. HTTP: the most requests on one connection's wire, closed or open loop; above 1 they are pipelined and the responses matched in order."))
    public var depth: Int?

    @Option(help: "How long to send, e.g. 10s, 500ms, 1m (default 10s unless --requests is given).")
    public var duration: String?

    @Option(help: "How many requests to send in total (instead of --duration).")
    public var requests: Int?

    @Option(help: "Verb weights, e.g. echo=70,tap=10,pay=10,search=10.")
    public var mix = "echo=70,tap=10,pay=10,search=10"

    @Option(help: "How many distinct keys TAP, PAY and SEARCH use.")
    public var keys = 1000

    @Option(name: .customLong("key-dist"), help: "Key distribution: uniform, zipf:<s> or unique.")
    public var keyDist = "uniform"

    @Option(name: .customLong("dup-ratio"), help: "Share of PAYs that reuse an earlier idem key sent by another connection (0...1).")
    public var dupRatio = 0.0

    @Option(help: "Open loop: requests per second over all connections (latency from the intended send time).")
    public var rate: Double?

    @Option(help: "Write the results as JSON to this file.")
    public var json: String?

    @Flag(name: .customLong("raw-echo"), help: "Send bare lines to a verbatim line echo server (the baselines); replies match in order.")
    public var rawEcho = false

    @Flag(name: .customLong("verbatim-echo"), help: "Send ECHO requests to a verbatim line echo server (the baselines); '<id> ECHO <text>' back counts as OK, so the client works as hard as against sluice-echo.")
    public var verbatimEcho = false

    @Option(name: .customLong("line-bytes"), help: "--raw-echo: bytes per line including the LF.")
    public var lineBytes = 64

    @Option(name: .customLong("echo-bytes"), help: "Bytes of text per ECHO request.")
    public var echoBytes = 16

    @Option(help: "Client event loops (threads).")
    public var loops = 1

    @Option(name: .customLong("drain-timeout"), help: "How long to wait for replies in flight after sending stops.")
    public var drainTimeout = "5s"

    @Option(help: "Seed for the random choices (verbs, keys, duplicates).")
    public var seed: UInt64 = 1

    @Flag(help: "No progress lines; only the final report.")
    public var quiet = false

    public init() {}

    /// The validated configuration these options describe.
    public func configuration() throws(LoadError) -> LoadConfiguration {
        var configuration = LoadConfiguration()
        configuration.host = host
        configuration.http = http
        configuration.ports = try port.map(parsePortList) ?? [http ? 8080 : 7070]
        configuration.connections = connections
        configuration.depth = depth ?? (http ? 1 : 8)
        switch (duration, requests) {
        case (.some, .some):
            throw LoadError("give --duration or --requests, not both", input: "")
        case (.some(let text), nil):
            configuration.limit = .duration(try parseDuration(text))
        case (nil, .some(let count)):
            configuration.limit = .requests(count)
        case (nil, nil):
            configuration.limit = .duration(.seconds(10))
        }
        configuration.rawEcho = rawEcho
        configuration.verbatimEcho = verbatimEcho
        configuration.mix = configuration.drivesEchoBaseline && mix == "echo=70,tap=10,pay=10,search=10"
            ? try RequestMix(parsing: "echo=1") : try RequestMix(parsing: mix)
        configuration.keys = keys
        configuration.keyDistribution = try KeyDistribution(parsing: keyDist)
        configuration.dupRatio = dupRatio
        configuration.rate = rate
        configuration.lineBytes = lineBytes
        configuration.echoBytes = echoBytes
        configuration.loops = loops
        configuration.drainTimeout = try parseDuration(drainTimeout)
        configuration.seed = seed
        try configuration.validate()
        return configuration
    }
}
