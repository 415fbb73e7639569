import Benchmark
import GateBenchPlugins
import Sluice
import SluiceBuiltInCodecs
import SluiceButtonTap
import SluiceLineProtocol
import SluicePayment
import Synchronization

/// The typed gate's decisions on one loop, beside the bare policy decision they wrap.
///
/// - "gate …" benchmarks call `Gate.submitNow` on the key's own loop, as a front does from its
///   libevent callback: one measured iteration is one request (key and shard lookup, decision,
///   outcome; a task when the effect runs). The iterations of one measurement run in one job on
///   the loop thread.
/// - "policy …" is the bare decision of the same policy on a table of the same keys.
/// - "await …" is `await gate.submit` from a task off the loop: one hop there and back.
/// - "line …" is the whole line-protocol path after the socket (parse, route, codec, reply
///   bytes), for reference.
///
/// Each measured sample submits its requests to the loop in one job; the time per request is
/// the sample's time divided by its requests.
/// Sub-microsecond paths run a million requests per sample: the one hop to the loop and back
/// that each sample makes (tens of microseconds on a busy VM) is then a rounding error.
var millionPerSample: Benchmark.Configuration {
    .init(metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .mega, maxDuration: .seconds(5), maxIterations: 20)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .throughput, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 50
    )
    millionKeyBenchmarks()

    Benchmark("policy: throttle decision, throttled (1,000 known keys)", configuration: millionPerSample) { benchmark in
        var table = try ThrottleTable<String>(options: try ThrottleOptions(interval: .seconds(3600)), budget: .bytes(16 << 20))
        let keys = (0..<1_000).map { "user:\($0)" }
        for (n, key) in keys.enumerated() { _ = try table.event(EventToken(UInt64(n)), key: key, now: .zero) }
        benchmark.startMeasurement()
        for n in benchmark.scaledIterations {
            blackHole(try table.event(EventToken(UInt64(n)), key: keys[n % keys.count], now: Instant(nanoseconds: Int64(n))))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("gate: TAP throttled (1,000 known keys)", configuration: millionPerSample) { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let requests = (0..<1_000).map { bench.gate.request(bench.tap, "user:\($0)") }
        await bench.onLoop(requests, count: requests.count)  // each key taps once: the rest are throttled
        benchmark.startMeasurement()
        await bench.onLoop(requests, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }

    Benchmark("gate: TAP throttled, request made per call (key, stable hash, submitNow)", configuration: millionPerSample) { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let keys = (0..<1_000).map { "user:\($0)" }
        let requests = keys.map { bench.gate.request(bench.tap, $0) }
        await bench.onLoop(requests, count: requests.count)
        let gate = bench.gate
        let tap = bench.tap
        let count = benchmark.scaledIterations.count
        benchmark.startMeasurement()
        await bench.group.loops[0].submit {
            for index in 0..<count {
                blackHole(gate.submitNow(gate.request(tap, keys[index % keys.count]), later: { { _ in } }))
            }
        }
        benchmark.stopMeasurement()
    }

    Benchmark("gate: TAP that runs (new key, effect task)") { benchmark in
        // One warm gate for every sample, as a running server's is: its tables, the tally and
        // the loop thread's memory exist and have grown. Each sample taps keys never seen.
        let bench = warmGate.bench
        let sample = warmGate.nextSample()
        let requests = (0..<benchmark.scaledIterations.count).map { bench.gate.request(bench.tap, "fresh:\(sample):\($0)") }
        benchmark.startMeasurement()
        await bench.onLoop(requests, count: requests.count)
        await bench.waitForEffects()
        benchmark.stopMeasurement()
    }

    Benchmark("gate: PAY replay of a stored record", configuration: millionPerSample) { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let requests = (0..<1_000).map {
            bench.gate.request(bench.pay, PaymentPlugin.Payment(key: "user:\($0)", idem: "idem-\($0)", amount: 100))
        }
        await bench.onLoop(requests, count: requests.count)  // store the records
        await bench.waitForEffects()
        benchmark.startMeasurement()
        await bench.onLoop(requests, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }

    Benchmark("gate: PAY new record (0 ms processor)") { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let count = benchmark.scaledIterations.count
        let requests = (0..<count).map {
            bench.gate.request(bench.pay, PaymentPlugin.Payment(key: "user:\($0 % 1_000)", idem: "new-\($0)", amount: 100))
        }
        benchmark.startMeasurement()
        await bench.onLoop(requests, count: count)
        await bench.waitForEffects()
        benchmark.stopMeasurement()
    }

    Benchmark("gate: chain GCRA per account → GCRA per address → concurrency per account, admitted, run in place", configuration: millionPerSample) { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let requests = (0..<1_000).map {
            bench.gate.request(bench.chain, ChainedCall.numbered($0))
        }
        await bench.onLoop(requests, count: requests.count)  // every key in its tables
        benchmark.startMeasurement()
        await bench.onLoop(requests, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }

    Benchmark("await: TAP throttled from a task off the loop") { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let requests = (0..<1_000).map { bench.gate.request(bench.tap, "user:\($0)") }
        await bench.onLoop(requests, count: requests.count)
        benchmark.startMeasurement()
        for n in benchmark.scaledIterations {
            blackHole(await bench.gate.submit(requests[n % requests.count]))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("line: TAP throttled (parse, route, codec, reply bytes)", configuration: millionPerSample) { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let lines = (0..<1_000).map { Array("t\($0) TAP user:\($0)".utf8) }
        await bench.feed(lines, count: lines.count)
        benchmark.startMeasurement()
        await bench.feed(lines, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }

    Benchmark("line: PAY replay (parse, route, codec, reply bytes)", configuration: millionPerSample) { benchmark in
        let bench = try GateBench()
        defer { bench.shutdown() }
        let lines = (0..<1_000).map { Array("p\($0) PAY user:\($0) idem-\($0) 100".utf8) }
        await bench.feed(lines, count: lines.count)
        await bench.waitForEffects()
        benchmark.startMeasurement()
        await bench.feed(lines, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
    }
}

/// The gate that "TAP that runs" keeps warm across its samples, and the samples taken so far.
final class WarmGate: Sendable {
    let bench: GateBench
    private let samples = Atomic<Int>(0)

    init() {
        do {
            bench = try GateBench()
        } catch {
            fatalError("The benchmark gate did not start: \(error)")
        }
    }

    /// A number no earlier sample had.
    func nextSample() -> Int { samples.add(1, ordering: .relaxed).newValue }
}

let warmGate = WarmGate()

/// A one-loop gate with TAP and PAY, its line front, and one session that drops its replies.
final class GateBench: Sendable {
    let group: SluiceLoopGroup
    let gate: Gate
    let tap: PluginHandle<ButtonTapPlugin>
    let pay: PluginHandle<PaymentPlugin>
    let chain: PluginHandle<ChainedPlugin>
    let session: LineSession

    init() throws {
        group = try SluiceLoopGroup(loopCount: 1, namePrefix: "bench")
        var plugins = PluginRegistry()
        var verbs = LineVerbs()
        tap = try plugins.register(ButtonTapPlugin(window: .seconds(3600)), budget: .bytes(64 << 20))
        try verbs.register(TapLineCodec(tap.plugin), for: tap)
        pay = try plugins.register(
            PaymentPlugin(retention: .seconds(3600), processor: SimulatedProcessor(latency: .zero)),
            budget: .bytes(64 << 20))
        try verbs.register(PayLineCodec(pay.plugin), for: pay)
        chain = try plugins.register(try ChainedPlugin(), budget: .bytes(64 << 20))
        gate = try Gate(group: group, plugins: plugins)
        let server = try LineServer(gate: gate, verbs: verbs)
        session = server.makeSession(transport: DroppingTransport(loop: group.loops[0]))
    }

    /// Submits `count` requests (cycling through `requests`) with `submitNow`, on the loop
    /// thread, in one job.
    func onLoop<Plugin: GatePlugin>(_ requests: [GateRequest<Plugin>], count: Int) async {
        let gate = self.gate
        await group.loops[0].submit {
            requests.withUnsafeBufferPointer { requests in
                for index in 0..<count {
                    blackHole(gate.submitNow(requests[index % requests.count], later: { { _ in } }))
                }
            }
        }
    }

    /// Feeds `count` lines (cycling through `lines`) to the session on the loop thread, in one
    /// job.
    func feed(_ lines: [[UInt8]], count: Int) async {
        let session = self.session
        await group.loops[0].submit {
            for index in 0..<count {
                lines[index % lines.count].withUnsafeBytes { session.received(line: $0) }
            }
        }
    }

    /// Waits until every started effect has ended.
    func waitForEffects() async {
        while await gate.statistics().executions > 0 {
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
    let loop: SluiceLoop
    let id: UInt64 = 1
    private(set) var bytes = 0

    init(loop: SluiceLoop) { self.loop = loop }

    func write(_ buffer: UnsafeRawBufferPointer) -> Bool {
        bytes &+= buffer.count
        return true
    }

    func closeAfterFlush() {}
}
