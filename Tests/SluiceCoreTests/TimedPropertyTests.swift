import PropertyBased
import SluiceCore
import SluiceTesting
import Testing

/// Drives a timed policy through events at whole ticks (1 ms), delivering requested timers through a
/// ``ManualTimerQueue`` before the events of the same tick; returns one line per observable outcome.
func trace(_ policy: TimedPolicy<some TimedPolicyState>, gaps: [Int]) -> [String] {
    var policy = policy
    var queue = ManualTimerQueue<Void>()
    var lines: [String] = []
    func ms(_ instant: Instant) -> Int64 { instant.nanoseconds / 1_000_000 }
    let fire: (inout ManualTimerQueue<Void>, Instant, Void) -> Void = { queue, now, _ in
        switch policy.fire(now: now) {
        case .run(let token): lines.append("\(ms(now)) run e\(token.rawValue)")
        case .reschedule(let deadline): queue.schedule(at: deadline, ())
        case .none: break
        }
    }
    var t: Int64 = 0
    for (n, gap) in gaps.enumerated() {
        t += Int64(gap)
        let now = Instant(milliseconds: t)
        queue.advance(to: now, fire)
        let token = UInt64(n + 1)
        switch policy.event(EventToken(token), now: now) {
        case .run: lines.append("\(t) run e\(token)")
        case .drop(let retryAfter): lines.append("\(t) drop e\(token) retry \(retryAfter.nanosecondsClamped / 1_000_000)")
        case .hold(let schedule, let old):
            if let schedule { queue.schedule(at: schedule, ()) }
            if let old { lines.append("\(t) superseded e\(old.rawValue)") }
            lines.append("\(t) hold e\(token)")
        }
    }
    while let deadline = queue.nextDeadline, lines.count < 100_000 {
        queue.advance(to: Swift.max(deadline, queue.now), fire)
    }
    return lines
}

/// A deliberately naive throttle: it keeps every run and every held event, and polls every tick
/// instead of asking for timers. Leading-only decisions come straight from the definition
/// "an event at t runs iff nothing ran in (t − I, t]".
struct NaiveThrottle {
    var interval: Int64
    var leading: Bool
    var trailing: Bool
    var first: Bool

    func trace(gaps: [Int]) -> [String] {
        var lines: [String] = []
        var runs: [Int64] = []
        var windowStart: Int64? = nil
        var held: [UInt64] = []
        var events: [(Int64, UInt64)] = []
        var t: Int64 = 0
        for (n, gap) in gaps.enumerated() {
            t += Int64(gap)
            events.append((t, UInt64(n + 1)))
        }
        var tick: Int64 = 0
        while true {
            let pendingEvents = events.contains { $0.0 >= tick }
            if !pendingEvents && held.isEmpty { break }
            if let start = windowStart, !held.isEmpty, tick >= start + interval {
                let token = first ? held.first! : held.last!
                lines.append("\(tick) run e\(token)")
                runs.append(tick)
                windowStart = tick
                held = []
            }
            for (time, token) in events where time == tick {
                if leading && !trailing {
                    if let last = runs.last(where: { $0 > tick - interval && $0 <= tick }) {
                        lines.append("\(tick) drop e\(token) retry \(last + interval - tick)")
                    } else {
                        lines.append("\(tick) run e\(token)")
                        runs.append(tick)
                    }
                    continue
                }
                let open = windowStart.map { tick < $0 + interval || !held.isEmpty } ?? false
                if !open {
                    windowStart = tick
                    if leading {
                        lines.append("\(tick) run e\(token)")
                        runs.append(tick)
                    } else {
                        held = [token]
                        lines.append("\(tick) hold e\(token)")
                    }
                } else if held.isEmpty {
                    held.append(token)
                    lines.append("\(tick) hold e\(token)")
                } else if first {
                    lines.append("\(tick) drop e\(token) retry \(Swift.max(0, windowStart! + interval - tick))")
                } else {
                    lines.append("\(tick) superseded e\(held.last!)")
                    held.append(token)
                    lines.append("\(tick) hold e\(token)")
                }
            }
            tick += 1
        }
        return lines
    }
}

/// A deliberately naive debounce: it keeps the burst's events, polls every tick for the quiet end
/// and the maxWait end, and never schedules anything.
struct NaiveDebounce {
    var quiet: Int64
    var maxWait: Int64?
    var leading: Bool
    var trailing: Bool

    func trace(gaps: [Int]) -> [String] {
        var lines: [String] = []
        var events: [(Int64, UInt64)] = []
        var t: Int64 = 0
        for (n, gap) in gaps.enumerated() {
            t += Int64(gap)
            events.append((t, UInt64(n + 1)))
        }
        var burst: [Int64] = []  // event times of the current burst
        var clockStart: Int64 = 0  // burst start or last run inside the burst
        var held: [UInt64] = []
        let maxWait = self.maxWait ?? Int64.max / 4
        var tick: Int64 = 0
        while true {
            if !events.contains(where: { $0.0 >= tick }) && held.isEmpty { break }
            if !held.isEmpty, let lastEvent = burst.last, tick >= lastEvent + quiet || tick >= clockStart + maxWait {
                lines.append("\(tick) run e\(held.last!)")
                held = []
                if tick >= lastEvent + quiet { burst = [] } else { clockStart = tick }
            }
            for (time, token) in events where time == tick {
                let inBurst = burst.last.map { tick < $0 + quiet || !held.isEmpty } ?? false
                if !inBurst {
                    burst = [tick]
                    clockStart = tick
                    if leading {
                        lines.append("\(tick) run e\(token)")
                    } else {
                        held = [token]
                        lines.append("\(tick) hold e\(token)")
                    }
                    continue
                }
                burst.append(tick)
                if trailing {
                    if let old = held.last { lines.append("\(tick) superseded e\(old)") }
                    held.append(token)
                    lines.append("\(tick) hold e\(token)")
                } else if tick >= clockStart + maxWait {
                    clockStart = tick
                    lines.append("\(tick) run e\(token)")
                } else {
                    lines.append("\(tick) drop e\(token) retry \(Swift.min(tick + quiet, clockStart + maxWait) - tick)")
                }
            }
            tick += 1
        }
        return lines
    }
}

@Suite struct TimedPropertyTests {
    static let gaps = Gen.int(in: 0...6).array(of: 0...40)

    @Test func throttleMatchesNaiveModel() async {
        await propertyCheck(count: 300, input: Gen.int(in: 1...6), Gen.int(in: 0...4), Self.gaps) { interval, mode, gaps in
            let (leading, trailing, first) = [(true, false, false), (true, true, false), (true, true, true), (false, true, false), (false, true, true)][mode]
            let options = try! ThrottleOptions(interval: .milliseconds(interval), leading: leading, trailing: trailing, delivers: first ? .first : .latest)
            let real = trace(Throttle(options: options), gaps: gaps)
            let naive = NaiveThrottle(interval: Int64(interval), leading: leading, trailing: trailing, first: first).trace(gaps: gaps)
            #expect(real == naive)
        }
    }

    @Test func debounceMatchesNaiveModel() async {
        await propertyCheck(count: 300, input: Gen.int(in: 1...5), Gen.int(in: 0...6), Gen.int(in: 0...2), Self.gaps) { quiet, extra, mode, gaps in
            let (leading, trailing) = [(false, true), (true, true), (true, false)][mode]
            let maxWait: Int64? = extra == 0 ? nil : Int64(quiet + extra - 1)
            let options = try! DebounceOptions(quiet: .milliseconds(quiet), maxWait: maxWait.map { .milliseconds($0) }, leading: leading, trailing: trailing)
            let real = trace(Debounce(options: options), gaps: gaps)
            let naive = NaiveDebounce(quiet: Int64(quiet), maxWait: maxWait, leading: leading, trailing: trailing).trace(gaps: gaps)
            #expect(real == naive)
        }
    }

    /// Throttle invariant straight from the definition: two runs are never closer than the interval.
    @Test func throttleRunsAreSpacedAndEveryEventSettles() async {
        await propertyCheck(count: 200, input: Gen.int(in: 1...6), Gen.int(in: 0...4), Self.gaps) { interval, mode, gaps in
            let (leading, trailing, first) = [(true, false, false), (true, true, false), (true, true, true), (false, true, false), (false, true, true)][mode]
            let options = try! ThrottleOptions(interval: .milliseconds(interval), leading: leading, trailing: trailing, delivers: first ? .first : .latest)
            let runTimes = trace(Throttle(options: options), gaps: gaps).filter { $0.contains(" run ") }.map { Int($0.split(separator: " ")[0])! }
            for (a, b) in zip(runTimes, runTimes.dropFirst()) {
                #expect(b - a >= interval)
            }
            // Every event is settled exactly once: run, dropped or superseded.
            let tokens = trace(Throttle(options: options), gaps: gaps).compactMap { line -> Substring? in
                let parts = line.split(separator: " ")
                return parts[1] == "hold" ? nil : parts[2]
            }
            #expect(Set(tokens).count == tokens.count)
            #expect(tokens.count == gaps.count)
        }
    }
}
