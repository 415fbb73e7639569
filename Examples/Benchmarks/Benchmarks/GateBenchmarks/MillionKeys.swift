import Benchmark
import Foundation
import Sluice
import SluiceButtonTap
import Synchronization

/// The decisions of the 1,000-key benchmarks with a million keys, visited in a uniformly random
/// order (each key once per pass, as a flood visits them) or in a Zipf-skewed order (s = 0.99,
/// as real traffic visits them): what a decision costs once the table no longer fits in any
/// cache.
func millionKeyBenchmarks() {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .mega, maxDuration: .seconds(10), maxIterations: 8)
    for order in KeyOrder.allCases {
        Benchmark("policy: throttle decision, throttled (1,000,000 known keys, \(order.rawValue) order)", configuration: configuration) { benchmark in
            let keys = millionKeys.keys
            let visits = millionKeys.visits(order)
            var table = try ThrottleTable<String>(options: try ThrottleOptions(interval: .seconds(3600)), budget: .bytes(64 << 20))
            for (n, key) in keys.enumerated() { _ = try table.event(EventToken(UInt64(n)), key: key, now: .zero) }
            benchmark.startMeasurement()
            for n in benchmark.scaledIterations {
                blackHole(try table.event(EventToken(UInt64(n)), key: keys[Int(visits[n % visits.count])], now: Instant(nanoseconds: Int64(n))))
            }
            benchmark.stopMeasurement()
        }

        Benchmark("policy: GCRA decision, limited (1,000,000 known keys, \(order.rawValue) order)", configuration: configuration) { benchmark in
            let keys = millionKeys.keys
            let visits = millionKeys.visits(order)
            // A table that holds every key (remembering, it would keep an eighth of its budget
            // for exact states and answer most keys from its summary: see below).
            var table = try RateLimitTable<String>(options: try RateLimitOptions(count: 1, per: .seconds(3600), burst: 0, whenFull: .forget), budget: .bytes(64 << 20))
            for key in keys { _ = try table.check(key: key, now: .zero) }
            benchmark.startMeasurement()
            for n in benchmark.scaledIterations {
                blackHole(try table.check(key: keys[Int(visits[n % visits.count])], now: Instant(nanoseconds: Int64(n))))
            }
            benchmark.stopMeasurement()
        }

        Benchmark("policy: GCRA decision, limited, most keys answered by the summary (1,000,000 keys, 16 MiB remembering table, \(order.rawValue) order)", configuration: configuration) { benchmark in
            let keys = millionKeys.keys
            let visits = millionKeys.visits(order)
            var table = try RateLimitTable<String>(options: try RateLimitOptions(count: 1, per: .seconds(3600), burst: 0), budget: .bytes(16 << 20))
            for key in keys { _ = try table.check(key: key, now: .zero) }
            benchmark.startMeasurement()
            for n in benchmark.scaledIterations {
                blackHole(try table.check(key: keys[Int(visits[n % visits.count])], now: Instant(nanoseconds: Int64(n))))
            }
            benchmark.stopMeasurement()
        }

        Benchmark("gate: TAP throttled (1,000,000 known keys, \(order.rawValue) order)", configuration: configuration) { benchmark in
            let bench = millionKeyGate.bench
            let requests = millionKeyGate.requests(order)
            await millionKeyGate.prepare()
            benchmark.startMeasurement()
            await bench.onLoop(requests, count: benchmark.scaledIterations.count)
            benchmark.stopMeasurement()
        }
    }
}

/// The order in which a benchmark visits a million keys.
enum KeyOrder: String, CaseIterable {
    case uniform
    case zipf
}

/// A million keys and the two visiting orders, made once (deterministic: a fixed-seed generator).
final class MillionKeys: Sendable {
    let keys: [String]
    /// Every key once, shuffled.
    let uniform: [Int32]
    /// A million draws from a Zipf distribution (s = 0.99) over the keys, the most popular
    /// first in `keys` order scattered by a shuffle.
    let zipf: [Int32]

    init() {
        let count = 1_000_000
        keys = (0..<count).map { "user:\($0)" }
        var random = SplitMix64(seed: 0x5EED)
        var shuffled = (0..<Int32(count)).map { $0 }
        shuffled.shuffle(using: &random)
        uniform = shuffled
        // Inverse CDF by binary search over the cumulative weights 1 / rank^0.99.
        var cumulative = [Double](repeating: 0, count: count)
        var total = 0.0
        for rank in 0..<count {
            total += pow(Double(rank + 1), -0.99)
            cumulative[rank] = total
        }
        var draws = [Int32](repeating: 0, count: count)
        for index in 0..<count {
            let target = Double(random.next() >> 11) / Double(1 << 53) * total
            var low = 0
            var high = count - 1
            while low < high {
                let mid = (low + high) / 2
                if cumulative[mid] < target { low = mid + 1 } else { high = mid }
            }
            draws[index] = shuffled[low]
        }
        zipf = draws
    }

    func visits(_ order: KeyOrder) -> [Int32] {
        switch order {
        case .uniform: uniform
        case .zipf: zipf
        }
    }
}

let millionKeys = MillionKeys()

/// A gate whose TAP table holds a million keys, each tapped once (so every later tap is
/// throttled), with the requests of both orders made up front.
final class MillionKeyGate: Sendable {
    let bench: GateBench
    let uniform: [GateRequest<ButtonTapPlugin>]
    let zipf: [GateRequest<ButtonTapPlugin>]

    init() {
        let bench: GateBench
        do {
            bench = try GateBench()
        } catch {
            fatalError("The benchmark gate did not start: \(error)")
        }
        self.bench = bench
        let byKey = millionKeys.keys.map { bench.gate.request(bench.tap, $0) }
        uniform = millionKeys.uniform.map { byKey[Int($0)] }
        zipf = millionKeys.zipf.map { byKey[Int($0)] }
        self.byKey = byKey
    }

    private let byKey: [GateRequest<ButtonTapPlugin>]
    private let prepared = Atomic<Bool>(false)

    /// Taps every key once, the first time it is called (outside the measurement).
    func prepare() async {
        guard !prepared.exchange(true, ordering: .relaxed) else { return }
        await bench.onLoop(byKey, count: byKey.count)
        await bench.waitForEffects()
    }

    func requests(_ order: KeyOrder) -> [GateRequest<ButtonTapPlugin>] {
        switch order {
        case .uniform: uniform
        case .zipf: zipf
        }
    }
}

let millionKeyGate = MillionKeyGate()
