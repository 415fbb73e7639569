import PropertyBased
import SluiceCore
import SluicePolicyModels
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

/// The marble tables of SluiceCore's "Policy semantics" article, exactly (one tick = 1 ms).
@Suite struct PolicyArticleMarbleTests {
    @Test func theThrottleMarble() throws {
        let options = try ThrottleOptions(interval: .milliseconds(4), leading: true, trailing: true, delivers: .latest)
        #expect(trace(Throttle(options: options), gaps: [0, 1, 1]) == [
            "0 run e1", "1 hold e2", "2 superseded e2", "2 hold e3", "4 run e3",
        ])
    }

    @Test func theDebounceMarble() throws {
        let options = try DebounceOptions(quiet: .milliseconds(3), maxWait: .milliseconds(5), leading: false, trailing: true)
        #expect(trace(Debounce(options: options), gaps: [0, 2, 2]) == [
            "0 hold e1", "2 superseded e1", "2 hold e2", "4 superseded e2", "4 hold e3", "5 run e3",
        ])
    }
}

@Suite struct TimedPropertyTests {
    static let gaps = Gen.int(in: 0...6).array(of: 0...40)

    @Test func throttleMatchesNaiveModel() async {
        await propertyCheck(count: 300, input: Gen.int(in: 1...6), Gen.int(in: 0...4), Self.gaps) { interval, mode, gaps in
            let (leading, trailing, first) = [(true, false, false), (true, true, false), (true, true, true), (false, true, false), (false, true, true)][mode]
            let options = try! ThrottleOptions(interval: .milliseconds(interval), leading: leading, trailing: trailing, delivers: first ? .first : .latest)
            let real = trace(Throttle(options: options), gaps: gaps)
            let naive = naiveThrottle(modelEvents(gaps: gaps), interval: Int64(interval), leading: leading, trailing: trailing, first: first)
            #expect(real == naive)
        }
    }

    @Test func debounceMatchesNaiveModel() async {
        await propertyCheck(count: 300, input: Gen.int(in: 1...5), Gen.int(in: 0...6), Gen.int(in: 0...2), Self.gaps) { quiet, extra, mode, gaps in
            let (leading, trailing) = [(false, true), (true, true), (true, false)][mode]
            let maxWait: Int64? = extra == 0 ? nil : Int64(quiet + extra - 1)
            let options = try! DebounceOptions(quiet: .milliseconds(quiet), maxWait: maxWait.map { .milliseconds($0) }, leading: leading, trailing: trailing)
            let real = trace(Debounce(options: options), gaps: gaps)
            let naive = naiveDebounce(modelEvents(gaps: gaps), quiet: Int64(quiet), maxWait: maxWait, leading: leading, trailing: trailing)
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
