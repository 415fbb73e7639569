import Benchmark
import Sluice
import SluiceButtonTap
import SluicePayment

/// Decisions per second on one loop, through the whole gate path a request line takes after the
/// socket: parse, route, shard decision, effect (a task when it runs), reply bytes. No sockets:
/// replies go to a transport that drops them. Each measured iteration is one request line; the
/// lines of one iteration batch are fed on the loop thread in one job.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .throughput, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 50
    )

    Benchmark("TAP decision: throttled (1,000 known keys)") { benchmark in
        let gate = try await Gate()
        defer { gate.shutdown() }
        let lines = (0..<1_000).map { Array("t\($0) TAP user:\($0)".utf8) }
        await gate.feed(lines, count: lines.count)  // each key taps once: the rest are throttled
        benchmark.startMeasurement()
        await gate.feed(lines, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }

    Benchmark("TAP decision: runs (new key, effect task + reply)") { benchmark in
        let gate = try await Gate()
        defer { gate.shutdown() }
        let lines = (0..<benchmark.scaledIterations.count).map { Array("t\($0) TAP fresh:\($0)".utf8) }
        benchmark.startMeasurement()
        await gate.feed(lines, count: lines.count)
        benchmark.stopMeasurement()
    }

    Benchmark("PAY decision (replay of a stored record)") { benchmark in
        let gate = try await Gate()
        defer { gate.shutdown() }
        let lines = (0..<1_000).map { Array("p\($0) PAY user:\($0) idem-\($0) 100".utf8) }
        await gate.feed(lines, count: lines.count)  // store the records
        await gate.waitForEffects()
        benchmark.startMeasurement()
        await gate.feed(lines, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }

    Benchmark("PAY decision + execution (new record, 0 ms processor)") { benchmark in
        let gate = try await Gate()
        defer { gate.shutdown() }
        let count = benchmark.scaledIterations.count
        let lines = (0..<count).map { Array("n\($0) PAY user:\($0 % 1_000) new-\($0)-\(benchmark.currentIteration) 100".utf8) }
        benchmark.startMeasurement()
        await gate.feed(lines, count: count)
        await gate.waitForEffects()
        benchmark.stopMeasurement()
    }
}

/// A one-loop gate with TAP and PAY, and one session that drops its replies.
final class Gate: Sendable {
    let group: EventLoopGroup
    let server: GateServer
    let session: GateSession

    init() async throws {
        group = try EventLoopGroup(loopCount: 1, namePrefix: "bench")
        var plugins = PluginRegistry()
        try plugins.register(ButtonTapPlugin(window: .seconds(3600)), budget: .bytes(16 << 20))
        try plugins.register(
            PaymentPlugin(retention: .seconds(3600), processor: SimulatedProcessor(latency: .zero)),
            budget: .bytes(16 << 20))
        server = try GateServer(group: group, configuration: GateConfiguration(), plugins: plugins)
        let transport = DroppingTransport(loop: group.loops[0])
        session = server.makeSession(transport: transport)
        let session = self.session
        await group.loops[0].submit { session.opened() }
    }

    /// Feeds `count` lines (cycling through `lines`) on the loop thread, in one job.
    func feed(_ lines: [[UInt8]], count: Int) async {
        let session = self.session
        await group.loops[0].submit {
            for index in 0..<count {
                lines[index % lines.count].withUnsafeBytes { session.received(line: $0) }
            }
        }
    }

    /// Waits until every started effect has replied.
    func waitForEffects() async {
        while await server.runningEffects() > 0 {
            await group.loops[0].submit {}
        }
    }

    func shutdown() {
        group.shutdownGracefully()
    }
}

/// A transport that counts and drops what is written.
final class DroppingTransport: SessionTransport, @unchecked Sendable {
    // @unchecked Sendable: `bytes` is touched on `loop`'s thread only (the session writes there).
    let loop: EventLoop
    let id: UInt64 = 1
    private(set) var bytes = 0

    init(loop: EventLoop) { self.loop = loop }

    func write(_ buffer: UnsafeRawBufferPointer) -> Bool {
        bytes &+= buffer.count
        return true
    }

    func closeAfterFlush() {}
}
