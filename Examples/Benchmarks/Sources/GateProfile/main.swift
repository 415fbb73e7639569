import GateBenchPlugins
import Sluice
import SluiceButtonTap
import SluicePayment

// Runs one gate path many times on its loop, for profilers (valgrind --tool=callgrind).
// Usage: gate-profile throttled|million|million-decision|flood-decision|runs|warm-runs|replay|pay|pay-complete|pay-samples|chain|unchained|task|await [count]
let arguments = CommandLine.arguments
let mode = arguments.count > 1 ? arguments[1] : "throttled"
let count = arguments.count > 2 ? Int(arguments[2]) ?? 100_000 : 100_000
let profile = try ProfileGate(namePrefix: "profile", chainLimits: mode != "unchained")
let group = profile.group
let gate = profile.gate
let tap = profile.tap
let pay = profile.pay
let chain = profile.chain
let taps = (0..<(mode == "runs" ? count : 1_000)).map { gate.request(tap, mode == "runs" ? "fresh:\($0)" : "user:\($0)") }
let pays = (0..<1_000).map { gate.request(pay, PaymentPlugin.Payment(key: "user:\($0)", idem: "idem-\($0)", amount: 100)) }
/// Submits `count` requests on the loop in one job; prints the time per request.
func run<P: GatePlugin>(_ requests: [GateRequest<P>], _ count: Int, report: Bool = true) async {
    let elapsed = await profile.submit(requests, count)
    if report, count > 0 {
        print("\(mode): \(nanoseconds(elapsed, per: count)) ns per request")
    }
}
/// `elapsed` in nanoseconds per one of `count` requests.
func nanoseconds(_ elapsed: Duration, per count: Int) -> Double {
    Double(elapsed.components.attoseconds / 1_000_000_000 + elapsed.components.seconds * 1_000_000_000) / Double(count)
}
switch mode {
case "pay-samples":
    // As GateBenchmarks' "PAY new record": each sample a fresh gate, 1,000 new payments timed
    // until every effect has ended; prints the median sample per payment.
    var samples: [Double] = []
    for _ in 0..<max(1, count / 1_000) {
        let sample = try ProfileGate(namePrefix: "sample")
        let requests = (0..<1_000).map { sample.gate.request(sample.pay, PaymentPlugin.Payment(key: "user:\($0 % 1_000)", idem: "new-\($0)", amount: 100)) }
        let start = ContinuousClock.now
        _ = await sample.submit(requests, requests.count)
        await sample.waitForEffects()
        samples.append(nanoseconds(ContinuousClock.now - start, per: 1_000))
        sample.group.shutdownGracefully()
    }
    samples.sort()
    print("pay-samples: median \(samples[samples.count / 2]) ns per payment, p25 \(samples[samples.count / 4]), p75 \(samples[samples.count * 3 / 4])")
case "await":
    // As GateBenchmarks' "await: TAP throttled from a task off the loop".
    await run(taps, taps.count, report: false)
    let elapsed = await Task.detached { () async -> Duration in
        let start = ContinuousClock.now
        for index in 0..<count { _ = await gate.submit(taps[index % taps.count]) }
        return ContinuousClock.now - start
    }.value
    print("await: \(nanoseconds(elapsed, per: count)) ns per request")
case "task":
    // The floor of an effect: an empty task started immediately on the loop.
    let loop = group.loops[0]
    let elapsed = await loop.submit { () -> Duration in
        let start = ContinuousClock.now
        for _ in 0..<count {
            Task.immediate(executorPreference: loop) { @concurrent () async -> Void in }
        }
        return ContinuousClock.now - start
    }
    print("task: \(nanoseconds(elapsed, per: count)) ns per Task.immediate")
case "runs":
    await run(taps, count)
case "warm-runs":
    // As GateBenchmarks' "TAP that runs": one gate, rounds of 10,000 keys never seen.
    for round in 0..<(count / 10_000) {
        let fresh = (0..<10_000).map { gate.request(tap, "fresh:\(round):\($0)") }
        await run(fresh, fresh.count, report: round % 20 == 19)
    }
case "million":
    // As GateBenchmarks' "TAP throttled (1,000,000 known keys, uniform order)".
    var random = SplitMix64(seed: 0x5EED)
    let million = (0..<1_000_000).map { gate.request(tap, "user:\($0)") }
    await run(million, million.count, report: false)
    await profile.waitForEffects()
    await run(million.shuffled(using: &random), count)
case "million-decision":
    // As GateBenchmarks' "policy: throttle decision, throttled (1,000,000 known keys, uniform
    // order)": the table alone, no gate.
    var random = SplitMix64(seed: 0x5EED)
    let keys = (0..<1_000_000).map { "user:\($0)" }
    let visits = (0..<keys.count).map { $0 }.shuffled(using: &random)
    var table = try ThrottleTable<String>(options: try ThrottleOptions(interval: .seconds(3600)), budget: .bytes(64 << 20))
    for (n, key) in keys.enumerated() { _ = try table.event(EventToken(UInt64(n)), key: key, now: .zero) }
    var throttled = 0
    let start = ContinuousClock.now
    for n in 0..<count {
        if case .drop = try table.event(EventToken(UInt64(n)), key: keys[visits[n % visits.count]], now: Instant(nanoseconds: Int64(n))).decision {
            throttled += 1
        }
    }
    let elapsed = ContinuousClock.now - start
    print("million-decision: \(nanoseconds(elapsed, per: count)) ns per decision (\(throttled) throttled)")
case "flood-decision":
    // A flood of keys never seen through a throttle table full of keys: each new key takes an
    // idle key's entry (about one entry in nine still in its window), as a flood of unique
    // keys meets a table that has filled; the table alone, no gate.
    var table = try ThrottleTable<String>(options: try ThrottleOptions(interval: .milliseconds(40)), budget: .bytes(16 << 20))
    let keys = (0..<2_000_000).map { "flood:\($0)" }
    var n = 0
    func flood(_ events: Int) throws -> Int {
        var ran = 0
        for _ in 0..<events {
            // One key a microsecond: 40,000 keys in a window.
            if case .run = try table.event(EventToken(UInt64(n)), key: keys[n % keys.count], now: Instant(nanoseconds: Int64(n) &* 1_000)).decision {
                ran += 1
            }
            n += 1
        }
        return ran
    }
    _ = try flood(1_000_000)  // full, evicting
    let start = ContinuousClock.now
    let ran = try flood(count)
    let elapsed = ContinuousClock.now - start
    print("flood-decision: \(nanoseconds(elapsed, per: count)) ns per decision (\(ran) ran, \(table.table.count) keys held)")
case "pay", "pay-complete":
    // `pay` times the submissions of new payments; `pay-complete`, as GateBenchmarks' "PAY new
    // record", times them until every payment's effect has ended.
    let fresh = (0..<count).map { gate.request(pay, PaymentPlugin.Payment(key: "user:\($0 % 1_000)", idem: "new-\($0)", amount: 100)) }
    if mode == "pay" {
        await run(fresh, count)
    } else {
        let start = ContinuousClock.now
        await run(fresh, count, report: false)
        await profile.waitForEffects()
        let elapsed = ContinuousClock.now - start
        print("pay-complete: \(nanoseconds(elapsed, per: count)) ns per payment")
    }
case "chain", "unchained":
    // As GateBenchmarks' "chain GCRA per account → GCRA per address → concurrency per account";
    // `unchained` runs the same plugin without its limits.
    let calls = (0..<1_000).map { gate.request(chain, ChainedCall.numbered($0)) }
    await run(calls, calls.count, report: false)
    await run(calls, count)
case "replay":
    await run(pays, pays.count, report: false)
    await profile.waitForEffects()
    await run(pays, count)
default:
    await run(taps, taps.count, report: false)
    await run(taps, count)
}
group.shutdownGracefully()
