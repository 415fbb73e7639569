import Benchmark
import SluiceCore

/// One decision on a known key, per policy: the pure state machine alone, and through the
/// per-shard key table (hash lookup + LRU touch + decision). Time and allocations are per decision
/// (the inner loop runs ×1M, or ×1K for the slow cases); setup and teardown are not measured.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .instructions],
        scalingFactor: .mega,
        maxDuration: .seconds(3),
        maxIterations: 30
    )

    /// 1,000 keys `user:<n>` already in the table; decisions target `user:500`.
    let keyCount = 1_000
    let knownKey = "user:500"
    let step: Int64 = 1_000  // 1 µs between events

    // MARK: Throttle

    Benchmark("Throttle decision (state)") { benchmark in
        let options = ThrottleOptions.buttonTap
        var state = ThrottleState()
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(state.event(EventToken(UInt64(i)), now: Instant(nanoseconds: now), options: options))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Throttle decision (table, known key)") { benchmark in
        var table = try! ThrottleTable<String>(options: .buttonTap, budget: .entries(keyCount))
        for n in 0..<keyCount { _ = try table.event(EventToken(0), key: "user:\(n)", now: .zero) }
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(try table.event(EventToken(UInt64(i)), key: knownKey, now: Instant(nanoseconds: now)))
        }
        benchmark.stopMeasurement()
    }

    // MARK: GCRA

    Benchmark("GCRA decision (state)") { benchmark in
        let options = RateLimitOptions.perConnectionEcho
        var state = RateLimitState()
        var now: Int64 = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            now &+= step
            blackHole(state.check(now: Instant(nanoseconds: now), options: options))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("GCRA decision (table, known key)") { benchmark in
        var table = try! RateLimitTable<String>(options: .perConnectionEcho, budget: .entries(keyCount))
        for n in 0..<keyCount { _ = try table.check(key: "user:\(n)", now: .zero) }
        var now: Int64 = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            now &+= step
            blackHole(try table.check(key: knownKey, now: Instant(nanoseconds: now)))
        }
        benchmark.stopMeasurement()
    }

    // MARK: Debounce

    Benchmark("Debounce decision (state)") { benchmark in
        let options = DebounceOptions.search
        var state = DebounceState()
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(state.event(EventToken(UInt64(i)), now: Instant(nanoseconds: now), options: options))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Debounce decision (table, known key)") { benchmark in
        var table = try! DebounceTable<String>(options: .search, budget: .entries(keyCount))
        for n in 0..<keyCount { _ = try table.event(EventToken(0), key: "user:\(n)", now: .zero) }
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(try table.event(EventToken(UInt64(i)), key: knownKey, now: Instant(nanoseconds: now)))
        }
        benchmark.stopMeasurement()
    }

    // MARK: Idempotency replay

    Benchmark("Idempotency replay (record)") { benchmark in
        let options = IdempotencyOptions.payment
        var record = IdempotencyRecord<UInt64, Int>.absent
        _ = record.begin(fingerprint: 0xF00D, token: EventToken(1), now: .zero, options: options)
        _ = record.complete(owner: EventToken(1), result: 201, isError: false, now: .zero, options: options)
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(record.begin(fingerprint: 0xF00D, token: EventToken(UInt64(i)), now: Instant(nanoseconds: now), options: options))
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Idempotency replay (table, known key)") { benchmark in
        var table = try! IdempotencyTable<String, UInt64, Int>(options: .payment, budget: .entries(keyCount))
        for n in 0..<keyCount {
            let key = "idem-\(n)"
            _ = try! table.begin(key: key, fingerprint: 0xF00D, token: EventToken(UInt64(n)), now: .zero)
            _ = table.complete(key: key, owner: EventToken(UInt64(n)), result: 201, now: .zero)
        }
        let known = "idem-500"
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(try! table.begin(key: known, fingerprint: 0xF00D, token: EventToken(UInt64(i)), now: Instant(nanoseconds: now)))
        }
        benchmark.stopMeasurement()
    }

    // MARK: New keys and controls

    /// A full table (100,000 entries): every event is for a key never seen, so each decision also
    /// evicts a key not used lately (the flood path).
    Benchmark("Throttle decision (full table, new key, evicts a key)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let capacity = 100_000
        var table = try! ThrottleTable<String>(options: .buttonTap, budget: .entries(capacity))
        let keys = (0..<1_000_000).map { "user:\($0)" }
        for n in 0..<capacity { _ = try table.event(EventToken(0), key: keys[n], now: .zero) }
        var next = capacity
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(try table.event(EventToken(UInt64(i)), key: keys[next], now: Instant(nanoseconds: now)))
            next = next + 1 == keys.count ? 0 : next + 1
        }
        benchmark.stopMeasurement()
    }

    /// Control for the allocation metric: exactly one heap allocation per iteration.
    Benchmark("Control: one allocation per iteration", configuration: .init(scalingFactor: .kilo)) { benchmark in
        for i in benchmark.scaledIterations {
            blackHole([i, i, i])
        }
        benchmark.stopMeasurement()
    }
}
