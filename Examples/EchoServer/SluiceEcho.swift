import ArgumentParser
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Sluice
import SluiceBuiltInCodecs
import SluiceButtonTap
import SluiceFronts
import SluiceHTTP
import SluiceLineProtocol
import SluicePage
import SluicePayment
import SluiceRateLimit
import SluicePaymentRedisLedger
import SluiceRedis
import SluiceSearch
import UnixSignals

/// `sluice-echo`: the example server every test, the load tester and a new user talk to. It
/// speaks the line protocol (`<id> <VERB> [args]`) with every built-in plugin on: `TAP`
/// (button tap throttle), `PAY` (exactly-once payments), `SEARCH` (debounce + switch-latest),
/// `LIMIT` (GCRA rate limit), `PAGE` (single-flight page loads), plus `PING`, `ECHO`, `CANCEL`
/// and `STATS`; and HTTP/1.1 with the same plugins on routes (`POST /pay`, `POST /tap/<key>`,
/// …) plus `/echo`, `/metrics` and `/healthz`. It is built on the public API alone: a ``Gate``
/// with the plugins, and two fronts with a codec per verb or route.
@main
struct SluiceEcho: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sluice-echo",
        abstract: "The Sluice example server: the line protocol and HTTP with every built-in plugin on."
    )

    @Option(help: "The address to listen on (an IP literal or localhost).")
    var host = "127.0.0.1"

    @Option(help: "The TCP port to listen on (0 picks a free one).")
    var port = 7070

    @Option(name: .customLong("http-port"), help: "The HTTP port (0 turns HTTP off).")
    var httpPort = 8080

    @Option(name: .customLong("http-max-body"), help: "HTTP: the largest request body accepted, in bytes (larger: 413).")
    var httpMaxBody = 1 << 20

    @Option(name: .customLong("http-max-header"), help: "HTTP: the largest request head accepted, in bytes: the request line and header fields through the blank line that ends them (larger: 431).")
    var httpMaxHeader = 16 << 10

    @Option(name: .customLong("http-head-timeout-s"), help: "HTTP: how long a request head may take from its first byte, in seconds (then 408 and close).")
    var httpHeadTimeoutSeconds = 10

    @Option(name: .customLong("http-body-timeout-s"), help: "HTTP: how long a request body may take once its head is complete, in seconds (then 408 and close).")
    var httpBodyTimeoutSeconds = 30

    @Option(name: .customLong("http-idle-timeout-s"), help: "HTTP: close a connection that sends nothing between requests, or reads none of its pending answers, for this many seconds.")
    var httpIdleTimeoutSeconds = 60

    @Option(name: .customLong("pay-concurrent"), help: "PAY: a duplicate while the first runs is refused (reject: ERR conflict, HTTP 409) or waits for its result (join). Default: the line protocol joins, HTTP refuses.")
    var payConcurrent: PayConcurrency?

    @Option(help: "How many event loops (threads) to run; default: one per core.")
    var loops: Int = SluiceLoopGroup.coreCount

    @Option(name: .customLong("tap-window-ms"), help: "TAP: the throttle window per key, in milliseconds.")
    var tapWindowMilliseconds = 1000

    @Option(name: .customLong("pay-latency-ms"), help: "PAY: the simulated processor's latency, in milliseconds.")
    var payLatencyMilliseconds = 20

    @Option(name: .customLong("pay-lease-ms"), help: "PAY with --redis: how long a running payment holds its record between renewals, in milliseconds (it renews every third of it; a lease that runs out means its instance died).")
    var payLeaseMilliseconds = 30_000

    @Option(name: .customLong("pay-retention-s"), help: "PAY: how long a payment's record is replayed, in seconds.")
    var payRetentionSeconds = 86_400

    @Option(name: .customLong("search-quiet-ms"), help: "SEARCH: the debounce quiet period, in milliseconds.")
    var searchQuietMilliseconds = 100

    @Option(name: .customLong("search-max-wait-ms"), help: "SEARCH: the longest a search waits while typing continues, in milliseconds.")
    var searchMaxWaitMilliseconds = 1000

    @Option(name: .customLong("search-latency-ms"), help: "SEARCH: the simulated search's latency, in milliseconds.")
    var searchLatencyMilliseconds = 30

    @Option(name: .customLong("limit-rate"), help: "LIMIT: requests allowed per period per key, sustained.")
    var limitRate = 10

    @Option(name: .customLong("limit-period-ms"), help: "LIMIT: the period of --limit-rate, in milliseconds.")
    var limitPeriodMilliseconds = 1000

    @Option(name: .customLong("limit-burst"), help: "LIMIT: requests a key may make back to back beyond the first (the limit is this plus one).")
    var limitBurst = 4

    @Option(name: .customLong("page-latency-ms"), help: "PAGE: the simulated load's latency, in milliseconds.")
    var pageLatencyMilliseconds = 50

    @Option(name: .customLong("echo-rate"), help: "ECHO: lines per second per connection.")
    var echoRate = 10_000

    @Option(name: .customLong("echo-burst"), help: "ECHO: lines a connection may send back to back.")
    var echoBurst = 1_000

    @Option(name: .customLong("max-line"), help: "The longest request line accepted, in bytes, not counting its LF (or CR LF).")
    var maxLine = 8192

    @Option(name: .customLong("idle-timeout-s"), help: "Close a connection that sends nothing, or reads none of its pending replies, for this many seconds (0: never).")
    var idleTimeoutSeconds = 300

    @Option(name: .customLong("line-timeout-s"), help: "Close a connection whose line is not complete this many seconds after its first byte (0: never).")
    var lineTimeoutSeconds = 10

    @Option(name: .customLong("max-connections"), help: "Open connections allowed; more are answered '- ERR too-many-connections' and closed (0: no cap).")
    var maxConnections = 10_000

    @Option(name: .customLong("max-in-flight"), help: "Requests per connection (line or HTTP) whose replies are still to come; at the cap the connection stops reading until one is answered.")
    var maxInFlight = 128

    @Option(name: .customLong("output-high-kib"), help: "Reply bytes a connection (line or HTTP) may leave unread before it stops reading, in KiB (it reads again below a quarter of that).")
    var outputHighKibibytes = 64

    @Option(name: .customLong("connection-buffers-mib"), help: "Bytes all connections (line and HTTP) may hold in their buffers together, in MiB; over it, connections stop reading until it drains.")
    var connectionBuffersMebibytes = 256

    @Option(name: .customLong("pay-rate"), help: "PAY: new payments allowed per account per --pay-period-ms, sustained (a GCRA stage named pay-rate after the idempotency record; a replay spends nothing). Off by default.")
    var payRate: Int?

    @Option(name: .customLong("pay-period-ms"), help: "PAY: the period of --pay-rate, in milliseconds (default: 1000; only with --pay-rate).")
    var payPeriodMilliseconds: Int?

    @Option(name: .customLong("pay-burst"), help: "PAY: new payments an account may make back to back beyond the first (the limit is this plus one; default: 0; only with --pay-rate).")
    var payBurst: Int?

    @Option(name: .customLong("pay-concurrency"), help: "PAY: payments one account may have running at once (a stage named pay-concurrency after --pay-rate). Off by default.")
    var payConcurrency: Int?

    @Option(name: .customLong("pay-records-per-key"), help: "PAY: new payments one account may open back to back, and as many more per --pay-retention-s; past that its new payments get ERR busy (0: no quota).")
    var payRecordsPerKey = PaymentPlugin.defaultRecordsPerKey

    @Option(name: .customLong("tap-table-mib"), help: "TAP: memory budget of the throttle table, in MiB (with its summary of evicted keys, when it remembers them).")
    var tapTableMebibytes = 64

    @Option(name: .customLong("tap-when-full"), help: "TAP: when the throttle table is full of live keys, evict one and forget it (a throttled key may tap again), evict one and remember it in a summary (a few never-seen keys in a million are throttled; past what the summary holds, new keys it cannot decide get ERR busy), or refuse the new key (ERR busy): forget, remember or refuse. With --redis the state is in Redis, and this applies only to the instance's own table under --redis-failure local.")
    var tapWhenFull: WhenTableFull = .forget

    @Option(name: .customLong("tap-tally-mib"), help: "TAP: memory budget of the per-key tap counts, in MiB (when full, a key not counted lately restarts from zero).")
    var tapTallyMebibytes = 32

    @Option(name: .customLong("pay-table-mib"), help: "PAY: memory budget of the idempotency table, in MiB (when full, new payments get ERR busy).")
    var payTableMebibytes = 256

    @Option(name: .customLong("search-table-mib"), help: "SEARCH: memory budget of the debounce table, in MiB.")
    var searchTableMebibytes = 64

    @Option(name: .customLong("limit-table-mib"), help: "LIMIT: memory budget of the GCRA table, in MiB (with its summary of evicted keys, when it remembers them).")
    var limitTableMebibytes = 64

    @Option(name: .customLong("limit-when-full"), help: "LIMIT: when the GCRA table is full of live keys, evict one and forget it (a limited key starts again with its full burst), evict one and remember it in a summary (a few never-seen keys in a million are limited; past what the summary holds, new keys it cannot decide get ERR busy), or refuse the new key (ERR busy): forget, remember or refuse. With --redis the state is in Redis, and this applies only to the instance's own table under --redis-failure local.")
    var limitWhenFull: WhenTableFull = .remember

    @Option(name: .customLong("page-table-mib"), help: "PAGE: memory budget of the loads in flight and their waiters, in MiB.")
    var pageTableMebibytes = 16

    @Option(name: [.customLong("drain-timeout-s"), .customLong("shutdown-grace-s")], help: "On SIGINT/SIGTERM, how long running effects (payments) may finish before they are cancelled, in seconds (--shutdown-grace-s is its former name).")
    var shutdownGraceSeconds = 10

    @Option(name: .customLong("redis"), help: "Keep TAP, LIMIT and PAY state in Redis, shared with every instance using the same server: redis://host:port[/db]. Without it, everything stays in this process's memory.")
    var redis: String?

    @Option(name: .customLong("redis-timeout-ms"), help: "How long a decision may wait for Redis before it counts as a failure, in milliseconds.")
    var redisTimeoutMilliseconds = 200

    @Option(name: .customLong("redis-failure"), help: "When Redis is unreachable or slower than --redis-timeout-ms: open (TAP and LIMIT run; PAY answers ERR unavailable), closed (ERR unavailable / 503) or local (this instance decides alone with limits divided by --instances; PAY replies say guarantee=local).")
    var redisFailure: StoreFailureMode = .closed

    @Option(name: .customLong("processor-ledger"), help: "PAY: keep the simulated processor's ledger of charges (by payment record, with the newest fence seen) in this Redis, shared with every instance given the same one, apart from --redis as a payment provider is apart from its clients: redis://host:port[/db]. Without it, each instance keeps its own in memory.")
    var processorLedger: String?

    @Flag(name: .customLong("reuse-port"), help: "Share the line and HTTP ports with other processes listening with this flag (SO_REUSEPORT): the kernel spreads connections over them, and each keeps its own in-memory state (share state with --redis). Without it, a port another socket serves is an error.")
    var reusePort = false

    @Option(name: .customLong("instances"), help: "How many instances share the Redis store (--redis-failure local divides the limits by it).")
    var instances = 1

    @Flag(
        name: .customLong("pay-stop-before-commit"),
        help: ArgumentHelp(
            "For tests: the first PAY to reach its commit point stops this process (SIGSTOP) right before its commit guard.",
            visibility: .hidden))
    var payStopBeforeCommit = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        func require(_ condition: Bool, _ message: String) throws {
            if !condition { throw ValidationError(message) }
        }
        try require(loops >= 1, "--loops must be at least 1 (got \(loops))")
        try require(tapWindowMilliseconds >= 1, "--tap-window-ms must be at least 1 (got \(tapWindowMilliseconds))")
        try require(payLatencyMilliseconds >= 0, "--pay-latency-ms must be 0 or more (got \(payLatencyMilliseconds))")
        try require(payLeaseMilliseconds >= 3, "--pay-lease-ms must be at least 3 (got \(payLeaseMilliseconds))")
        try require(payRetentionSeconds >= 1, "--pay-retention-s must be at least 1 (got \(payRetentionSeconds))")
        try require(searchQuietMilliseconds >= 1, "--search-quiet-ms must be at least 1 (got \(searchQuietMilliseconds))")
        try require(
            searchMaxWaitMilliseconds >= searchQuietMilliseconds,
            "--search-max-wait-ms must be at least --search-quiet-ms (got \(searchMaxWaitMilliseconds))")
        try require(searchLatencyMilliseconds >= 0, "--search-latency-ms must be 0 or more (got \(searchLatencyMilliseconds))")
        try require(idleTimeoutSeconds >= 0, "--idle-timeout-s must be 0 or more (got \(idleTimeoutSeconds))")
        try require(lineTimeoutSeconds >= 0, "--line-timeout-s must be 0 or more (got \(lineTimeoutSeconds))")
        try require(maxConnections >= 0, "--max-connections must be 0 or more (got \(maxConnections))")
        try require(maxInFlight >= 1, "--max-in-flight must be at least 1 (got \(maxInFlight))")
        try require(outputHighKibibytes >= 1, "--output-high-kib must be at least 1 (got \(outputHighKibibytes))")
        try require(connectionBuffersMebibytes >= 1, "--connection-buffers-mib must be at least 1 (got \(connectionBuffersMebibytes))")
        try require(payRate.map { $0 >= 1 } ?? true, "--pay-rate must be at least 1 (got \(payRate ?? 0))")
        try require(
            payRate != nil || (payPeriodMilliseconds == nil && payBurst == nil),
            "--pay-period-ms and --pay-burst shape --pay-rate, which is not set")
        try require(payPeriodMilliseconds.map { $0 >= 1 } ?? true, "--pay-period-ms must be at least 1 (got \(payPeriodMilliseconds ?? 0))")
        try require(payBurst.map { $0 >= 0 } ?? true, "--pay-burst must be 0 or more (got \(payBurst ?? 0))")
        try require(payConcurrency.map { $0 >= 1 } ?? true, "--pay-concurrency must be at least 1 (got \(payConcurrency ?? 0))")
        try require(payRecordsPerKey >= 0, "--pay-records-per-key must be 0 or more (got \(payRecordsPerKey))")
        try require(limitRate >= 1, "--limit-rate must be at least 1 (got \(limitRate))")
        try require(limitPeriodMilliseconds >= 1, "--limit-period-ms must be at least 1 (got \(limitPeriodMilliseconds))")
        try require(limitBurst >= 0, "--limit-burst must be 0 or more (got \(limitBurst))")
        try require(pageLatencyMilliseconds >= 0, "--page-latency-ms must be 0 or more (got \(pageLatencyMilliseconds))")
        try require(shutdownGraceSeconds >= 0, "--drain-timeout-s must be 0 or more (got \(shutdownGraceSeconds))")
        try require((0...65535).contains(httpPort), "--http-port must be 0...65535 (got \(httpPort))")
        try require(redisTimeoutMilliseconds >= 1, "--redis-timeout-ms must be at least 1 (got \(redisTimeoutMilliseconds))")
        try require(instances >= 1, "--instances must be at least 1 (got \(instances))")
        for (name, value) in [
            ("--tap-table-mib", tapTableMebibytes), ("--pay-table-mib", payTableMebibytes),
            ("--search-table-mib", searchTableMebibytes), ("--limit-table-mib", limitTableMebibytes),
            ("--page-table-mib", pageTableMebibytes), ("--tap-tally-mib", tapTallyMebibytes),
        ] {
            try require(value >= 1, "\(name) must be at least 1 (got \(value))")
        }
        do {
            try lineConfiguration.validate()
            if httpPort != 0 { try httpConfiguration.validate() }
            do {
                _ = try RateLimitPlugin(count: limitRate, per: .milliseconds(limitPeriodMilliseconds), burst: limitBurst)
            } catch {
                throw ValidationError("LIMIT: \(error.message) (got \(error.value))")
            }
            do {
                _ = try payLimits()
            } catch {
                throw ValidationError("PAY: \(error.message) (got \(error.value))")
            }
            if let redis { _ = try RedisEndpoint(url: redis) }
            if let processorLedger { _ = try RedisEndpoint(url: processorLedger) }
        } catch let error as SluiceError {
            throw ValidationError("\(error.message) (got \(error.value))")
        }
    }

    var lineConfiguration: LineConfiguration {
        LineConfiguration(
            tcp: TCPConfiguration(
                host: host, port: port,
                outputHighWatermark: outputHighKibibytes << 10,
                outputLowWatermark: (outputHighKibibytes << 10) / 4,
                idleTimeout: idleTimeoutSeconds == 0 ? nil : .seconds(idleTimeoutSeconds),
                maximumConnections: maxConnections == 0 ? nil : maxConnections,
                connectionBufferBudget: connectionBuffersMebibytes << 20, reusePort: reusePort),
            framing: LineFraming(maximumLineLength: maxLine, lineTimeout: lineTimeoutSeconds == 0 ? nil : .seconds(lineTimeoutSeconds)),
            echoRate: echoRate,
            echoBurst: echoBurst,
            maximumInFlight: maxInFlight)
    }

    var httpConfiguration: HTTPFrontConfiguration {
        HTTPFrontConfiguration(
            http: HTTPConfiguration(
                host: host, port: httpPort, maximumHeadBytes: httpMaxHeader, maximumBodyBytes: httpMaxBody,
                headTimeout: .seconds(httpHeadTimeoutSeconds), bodyTimeout: .seconds(httpBodyTimeoutSeconds),
                idleTimeout: .seconds(httpIdleTimeoutSeconds), maximumInFlight: maxInFlight,
                outputHighWatermark: outputHighKibibytes << 10, outputLowWatermark: (outputHighKibibytes << 10) / 4,
                maximumConnections: maxConnections == 0 ? nil : maxConnections,
                connectionBufferBudget: connectionBuffersMebibytes << 20, reusePort: reusePort),
            echoRate: echoRate,
            echoBurst: echoBurst)
    }

    /// PAY's chain after its idempotency record: `pay-rate` (with `--pay-rate`), then
    /// `pay-concurrency` (with `--pay-concurrency`), both per account.
    func payLimits() throws(SluiceError) -> [LimitStage<PaymentPlugin.Payment>] {
        try PaymentPlugin.accountLimits(
            rate: try payRate.map { rate throws(SluiceError) in
                try RateLimitOptions(count: rate, per: .milliseconds(payPeriodMilliseconds ?? 1_000), burst: payBurst ?? 0)
            },
            concurrency: payConcurrency)
    }

    /// Registers every built-in plugin with the gate's registry and its codec with the line
    /// front and the HTTP front, in the order `STATS` reports them. TAP, LIMIT and PAY keep their
    /// state in `store`; the payment processor keeps its charges in `ledger`.
    func makePlugins(store: PluginStore, ledger: any ChargeLedger) throws -> (PluginRegistry, LineVerbs, HTTPRoutes) {
        var plugins = PluginRegistry()
        var verbs = LineVerbs()
        var routes = HTTPRoutes()
        let tap = try plugins.register(
            ButtonTapPlugin(window: .milliseconds(tapWindowMilliseconds), whenFull: tapWhenFull),
            budget: .bytes(tapTableMebibytes << 20), tallyBudget: .bytes(tapTallyMebibytes << 20), store: store)
        try verbs.register(TapLineCodec(tap.plugin), for: tap)
        try routes.register(TapHTTPCodec(tap.plugin), for: tap)
        let stopBeforeCommit: (@Sendable () -> Void)? = payStopBeforeCommit ? StopBeforeCommit.stopOnce : nil
        let pay = try plugins.register(
            PaymentPlugin(
                retention: .seconds(payRetentionSeconds),
                lease: .milliseconds(payLeaseMilliseconds),
                concurrent: payConcurrent?.option ?? .join,
                recordsPerKey: payRecordsPerKey == 0 ? nil : payRecordsPerKey,
                limits: try payLimits(),
                processor: SimulatedProcessor(
                    latency: .milliseconds(payLatencyMilliseconds), ledger: ledger,
                    beforeCommit: stopBeforeCommit)),
            budget: .bytes(payTableMebibytes << 20), store: store)
        try verbs.register(PayLineCodec(pay.plugin), for: pay)
        try routes.register(PayHTTPCodec(pay.plugin, concurrent: payConcurrent?.option ?? .reject), for: pay)
        let search = try plugins.register(
            SearchPlugin(
                quiet: .milliseconds(searchQuietMilliseconds),
                maxWait: .milliseconds(searchMaxWaitMilliseconds),
                latency: .milliseconds(searchLatencyMilliseconds)),
            budget: .bytes(searchTableMebibytes << 20))
        try verbs.register(SearchLineCodec(search.plugin), for: search)
        try routes.register(SearchHTTPCodec(search.plugin), for: search)
        let limit = try plugins.register(
            RateLimitPlugin(count: limitRate, per: .milliseconds(limitPeriodMilliseconds), burst: limitBurst, whenFull: limitWhenFull),
            budget: .bytes(limitTableMebibytes << 20), store: store)
        try verbs.register(LimitLineCodec(limit.plugin), for: limit)
        try routes.register(LimitHTTPCodec(limit.plugin), for: limit)
        let page = try plugins.register(
            PagePlugin(latency: .milliseconds(pageLatencyMilliseconds)),
            budget: .bytes(pageTableMebibytes << 20))
        try verbs.register(PageLineCodec(page.plugin), for: page)
        try routes.register(PageHTTPCodec(page.plugin), for: page)
        return (plugins, verbs, routes)
    }

    func run() async throws {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "sluice-echo")
        let group = try SluiceLoopGroup(loopCount: loops, namePrefix: "echo-loop")
        defer { group.shutdownGracefully() }
        var store = PluginStore.memory
        var redisStore: RedisStore?
        if let redis {
            let created = RedisStore(
                endpoint: try RedisEndpoint(url: redis), group: group, timeout: .milliseconds(redisTimeoutMilliseconds),
                logger: logger)
            created.start()
            redisStore = created
            store = try .shared(created, whenUnavailable: redisFailure, instances: instances)
            logger.info(
                "TAP, LIMIT and PAY state in Redis",
                metadata: ["redis": "\(created.endpoint)", "failure-mode": "\(redisFailure)", "instances": "\(instances)"])
        }
        let ledger: any ChargeLedger
        var redisLedger: RedisChargeLedger?
        if let processorLedger {
            let created = RedisChargeLedger(
                endpoint: try RedisEndpoint(url: processorLedger), group: group, retention: .seconds(payRetentionSeconds),
                logger: logger)
            created.start()
            redisLedger = created
            ledger = created
            logger.info("the payment processor's ledger in Redis", metadata: ["redis": "\(created.endpoint)"])
        } else {
            ledger = MemoryChargeLedger(retention: .seconds(payRetentionSeconds))
        }
        let (plugins, verbs, routes) = try makePlugins(store: store, ledger: ledger)
        let gate = try Gate(
            group: group, plugins: plugins,
            options: GateOptions(shutdownGracePeriod: .seconds(shutdownGraceSeconds)), logger: logger)
        // One connection cap for both fronts.
        let accounting = ConnectionAccounting(
            maximumConnections: maxConnections == 0 ? nil : maxConnections,
            bufferBudget: connectionBuffersMebibytes << 20)
        let server = try LineServer(
            gate: gate, verbs: verbs, configuration: lineConfiguration, accounting: accounting, logger: logger)
        var services: [any Service] = [gate, server]
        var activities = [server.activity]
        if httpPort != 0 {
            let front = try HTTPFront(
                gate: gate, routes: routes, configuration: httpConfiguration, accounting: accounting,
                metrics: { registry.emitToBuffer() }, logger: logger)
            services.append(front)
            activities.append(front.activity)
        }
        // On SIGTERM/SIGINT the services stop in reverse order: the fronts stop accepting, then
        // the gate drains (open connections get `ERR shutting-down` / 503 meanwhile); the loops
        // stop last.
        let serviceGroup = ServiceGroup(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        let outcome: Result<Void, any Error>
        do {
            try await serviceGroup.run()
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        // The gate has drained. Requests still on their way (sent before their client read the
        // answer that closed its connection) are read and answered 503 until the clients go
        // quiet; then the store closes while its loops still run, so that its last callbacks
        // find them; the loops stop last (defer).
        for activity in activities { await activity.waitForQuiet() }
        await redisStore?.shutdown()
        await redisLedger?.shutdown()
        try outcome.get()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

extension StoreFailureMode: ExpressibleByArgument {}

/// `--pay-concurrent`: what a duplicate payment gets while the first runs.
enum PayConcurrency: String, ExpressibleByArgument, CaseIterable {
    case reject
    case join

    var option: IdempotencyOptions.Concurrent {
        switch self {
        case .reject: .reject
        case .join: .join
        }
    }
}

extension WhenTableFull: ExpressibleByArgument {}
