import Benchmark
import SluiceCore

/// One decision on a known key, per policy: the pure state machine alone, and through the
/// per-shard key table (hash lookup + LRU touch + decision). Time is per decision (scaled ×1M);
/// allocations are totals per 1M decisions.
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
    }

    Benchmark("Throttle decision (table, known key)") { benchmark in
        var table = try! ThrottleTable<String>(options: .buttonTap, budget: .entries(keyCount))
        for n in 0..<keyCount { _ = table.event(EventToken(0), key: "user:\(n)", now: .zero) }
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(table.event(EventToken(UInt64(i)), key: knownKey, now: Instant(nanoseconds: now)))
        }
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
    }

    Benchmark("GCRA decision (table, known key)") { benchmark in
        var table = try! RateLimitTable<String>(options: .perConnectionEcho, budget: .entries(keyCount))
        for n in 0..<keyCount { _ = table.check(key: "user:\(n)", now: .zero) }
        var now: Int64 = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            now &+= step
            blackHole(table.check(key: knownKey, now: Instant(nanoseconds: now)))
        }
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
    }

    Benchmark("Debounce decision (table, known key)") { benchmark in
        var table = try! DebounceTable<String>(options: .search, budget: .entries(keyCount))
        for n in 0..<keyCount { _ = table.event(EventToken(0), key: "user:\(n)", now: .zero) }
        var now: Int64 = 0
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            now &+= step
            blackHole(table.event(EventToken(UInt64(i)), key: knownKey, now: Instant(nanoseconds: now)))
        }
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
    }
}
