import FuzzModels
import FuzzSupport
import SluiceCore

// fuzz-ratelimit: GCRA (`RateLimitOptions`, `RateLimitState`, `RateLimit`, `RateLimitTable`) on a
// few keys with time that never goes back.
//
// Input: [mode] [options…] then operations: checks of a quantity on keys 0–2 after a gap,
// checks whose quantity is refunded at once, sweeps (and, in wide mode, refunds at any time).
//
// - Options are validated: they throw exactly when the count is below 1, the period is not
//   positive, the burst is negative, period / count is below 1 ns or the burst window
//   (τ + E) is longer than a quarter of Int64's range (73 years); they never trap.
// - Exact mode (small options, a table with room for every key): every decision (allowed,
//   limit, remaining, retryAfter, resetAfter) equals a naive GCRA that keeps every allowed
//   request (the model of the project's property tests); a refund right after an allowed check
//   undoes it; a standalone `RateLimit` decides key 0 like the table; `admit` decides and
//   changes the state like `check` of one event.
// - Both modes (wide mode with a tolerance τ of at most a quarter of the timeline and instants
//   up to another quarter): the quantity allowed for a key in any window [s, t] is at most
//   (t − s) / E + burst + 1 (E = period / count), computed without overflow; a decision's
//   fields are in range (0 ≤ remaining ≤ limit, resetAfter ≥ 0, retryAfter > 0 and only when
//   limited); the table never holds more keys than its capacity. A key evicted while live starts
//   again with its full burst, so its window history starts again.

/// The window invariant over one key's allowed requests, in 128-bit arithmetic.
struct WindowCheck {
    var emission: Int128
    var burst: Int128
    var allowed: [(time: Int64, quantity: Int128)] = []
    /// False once a refund gave back what may never have been taken.
    var enabled = true

    mutating func record(time: Int64, quantity: Int) {
        let q = Int128(Swift.max(0, quantity))
        guard enabled, q > 0 else { return }
        allowed.append((time, q))
        var total: Int128 = 0
        for entry in allowed.reversed() {
            total += entry.quantity
            // total ≤ (t − s) / E + burst + 1  ⇔  total × E ≤ (t − s) + E × (burst + 1)
            let span = Int128(time) - Int128(entry.time)
            require(
                total * emission <= span + emission * (burst + 1),
                "\(total) allowed in [\(entry.time), \(time)] with E = \(emission), burst = \(burst): \(allowed)")
        }
    }
}

/// What `RateLimitOptions` should say about these values: valid, with (E, τ), or invalid.
func expectedOptions(count: Int, period: Duration, burst: Int) -> (emission: Int64, tolerance: Int64)? {
    guard count >= 1, period > .zero, burst >= 0 else { return nil }
    let emission = period.nanosecondsClamped / Int64(count)
    guard emission >= 1 else { return nil }
    let tolerance = Int128(emission) * (Int128(burst) + 1)
    guard tolerance + Int128(emission) <= Int128(Int64.max / 4) else { return nil }
    return (emission, Int64(tolerance))
}

func checkFields(_ decision: RateLimitDecision, burst: Int, quantity: Int, emission: Int64, tolerance: Int64) {
    require(decision.limit == burst + 1, "limit \(decision.limit), burst \(burst)")
    require(decision.remaining >= 0 && decision.remaining <= decision.limit, "remaining \(decision.remaining) of \(decision.limit)")
    require(decision.resetAfter >= .zero, "resetAfter \(decision.resetAfter)")
    if decision.allowed {
        require(decision.retryAfter == nil, "allowed with retryAfter \(String(describing: decision.retryAfter))")
    } else if let retryAfter = decision.retryAfter {
        require(retryAfter > .zero, "limited with retryAfter \(retryAfter)")
    } else {
        // Limited for ever: only a quantity larger than the whole burst.
        require(
            Int128(Swift.max(0, quantity)) * Int128(emission) > Int128(tolerance),
            "limited with no retryAfter, quantity \(quantity), E \(emission), tolerance \(tolerance)")
    }
}

let keyCount = 3

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let wide = input.bool()
    let count: Int
    let period: Duration
    let burst: Int
    if wide {
        // Any values at all, negative and huge ones included.
        count = Int(input.wideInt())
        let periodNanos = input.wideInt()
        period = input.bool() ? .nanoseconds(periodNanos) : .seconds(periodNanos)
        burst = Int(input.wideInt())
    } else {
        count = 1 + input.below(8)
        period = .nanoseconds(1 + Int64(input.byte()))
        burst = input.below(6)
    }
    let expected = expectedOptions(count: count, period: period, burst: burst)
    let options: RateLimitOptions
    do {
        options = try RateLimitOptions(count: count, per: period, burst: burst)
    } catch {
        require(expected == nil, "RateLimitOptions(count: \(count), per: \(period), burst: \(burst)) threw \(error)")
        return 0
    }
    guard let (emission, tolerance) = expected else {
        fatalError("RateLimitOptions(count: \(count), per: \(period), burst: \(burst)) did not throw")
    }
    require(options.limit == burst + 1, "limit \(options.limit)")
    // Options refuse windows over a quarter of the timeline (73 years), and instants go up to
    // another quarter, so no sum in a decision saturates.

    let exact = !wide
    let capacity = exact ? 8 : 1 + input.below(4)
    var table = try! RateLimitTable<Int>(options: options, budget: .entries(capacity))
    var naive = Array(repeating: NaiveRateLimit(emission: emission, tolerance: tolerance, burst: burst), count: keyCount)
    var windows = Array(repeating: WindowCheck(emission: Int128(emission), burst: Int128(burst)), count: keyCount)
    var single = RateLimit(options: options)
    var viaAdmit = RateLimitState()
    var clock: Int64 = 0
    // Wide mode stops the clock at a quarter of the timeline (73 years), far from saturation.
    let clockLimit = Int64.max / 4

    /// Which keys hold live state now.
    func liveKeys() -> [Bool] {
        (0..<keyCount).map { key in
            guard let index = table.table.index(of: key) else { return false }
            return !table.table[index].isIdle(at: Instant(nanoseconds: clock))
        }
    }

    var operations = 0
    while !input.isExhausted, operations < 600 {
        operations += 1
        let code = input.byte()
        let key = Int(code >> 3) % keyCount
        switch code & 7 {
        case 0...5:
            let gap: Int64
            if wide {
                gap = input.wideInt() & Int64.max
            } else {
                gap = code & 7 == 5 ? Int64(input.byte()) * 4 : Int64(input.below(32))
            }
            let (sum, overflow) = clock.addingReportingOverflow(gap)
            clock = overflow ? clockLimit : Swift.min(sum, clockLimit)
            let quantity: Int
            if wide {
                quantity = Int(input.wideInt())
            } else {
                quantity = input.below(5)
            }
            let refundAtOnce = code & 7 == 4
            let now = Instant(nanoseconds: clock)
            let live = liveKeys()
            let decision: RateLimitDecision
            do {
                decision = try table.check(key: key, now: now, quantity: quantity)
            } catch {
                fatalError("an Int key was refused: \(error)")
            }
            require(table.table.count <= capacity, "\(table.table.count) keys, capacity \(capacity)")
            for other in 0..<keyCount where other != key && live[other] && table.table.index(of: other) == nil {
                // Evicted while live: it starts again with its full burst.
                require(!exact, "exact mode evicted key \(other)")
                naive[other].allowed = []
                windows[other].allowed = []
            }
            checkFields(decision, burst: burst, quantity: quantity, emission: emission, tolerance: tolerance)
            if exact {
                let want = naive[key].check(t: clock, quantity: quantity)
                require(decision == want, "key \(key), quantity \(quantity) at \(clock): \(decision) but the naive GCRA says \(want)")
                if key == 0 {
                    let standalone = single.check(now: now, quantity: quantity)
                    require(standalone == decision, "key 0 at \(clock): standalone \(standalone), table \(decision)")
                    if quantity == 1 {
                        let wait = viaAdmit.admit(now: now, options: options)
                        require(wait == (decision.allowed ? nil : decision.retryAfter), "admit at \(clock) waits \(String(describing: wait)); check said \(decision)")
                    } else {
                        _ = viaAdmit.check(now: now, options: options, quantity: quantity)
                    }
                    require(viaAdmit == single.state, "admit and check states differ at \(clock)")
                }
            }
            if decision.allowed {
                if refundAtOnce {
                    table.refund(key: key, quantity: quantity, now: now)
                    if exact {
                        naive[key].allowed.removeLast()
                        if key == 0 {
                            single.state.refund(quantity: quantity, now: now, options: options)
                            viaAdmit.refund(quantity: quantity, now: now, options: options)
                        }
                    }
                } else {
                    windows[key].record(time: clock, quantity: quantity)
                }
            }
        case 6:
            if wide {
                // A refund at any time: it may give back what was never taken, so the window
                // history no longer bounds the key; only the fields are checked from here on.
                let quantity = Int(input.wideInt())
                table.refund(key: key, quantity: quantity, now: Instant(nanoseconds: clock))
                windows[key].allowed = []
                windows[key].enabled = false
            } else {
                let before = table.table.count
                let maxEntries = input.below(4)
                let removed = table.sweep(now: Instant(nanoseconds: clock), maxEntries: maxEntries)
                require(removed <= maxEntries && removed == before - table.table.count, "sweep removed \(removed) of \(before)")
            }
        default:
            let before = table.table.count
            let removed = table.sweep(now: Instant(nanoseconds: clock), maxEntries: 1_000)
            require(removed == before - table.table.count, "sweep removed \(removed) of \(before)")
            for key in 0..<keyCount {
                if let index = table.table.index(of: key) {
                    require(!table.table[index].isIdle(at: Instant(nanoseconds: clock)), "a full sweep left idle key \(key)")
                }
            }
        }
    }
    return 0
}
