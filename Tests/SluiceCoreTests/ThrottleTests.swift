import SluiceCore
import Testing

@Suite struct ThrottleTests {
    static func options(_ interval: Int64, leading: Bool = true, trailing: Bool = false, first: Bool = false) -> ThrottleOptions {
        try! ThrottleOptions(interval: .milliseconds(interval), leading: leading, trailing: trailing, delivers: first ? .first : .latest)
    }

    typealias MarbleCase = MarbleDiagram<ThrottleOptions>

    static let marbles: [MarbleCase] = [
        // Leading only (button tap): one run per window, the rest dropped.
        MarbleCase(name: "leading, interval 3", options: options(3), input: "abcdefg|", output: "a--d--g", dropped: "bcef"),
        MarbleCase(name: "leading, interval 1 lets everything through", options: options(1), input: "abcdefghijk|", output: "abcdefghijk"),
        MarbleCase(name: "leading, sparse", options: options(3), input: "a-b---c-d|", output: "a-----c", dropped: "bd"),
        // Leading + trailing (lodash default): the trailing run starts a new window.
        MarbleCase(name: "leading+trailing latest, interval 3", options: options(3, trailing: true), input: "abcdefg---|", output: "a--c--f--g", superseded: "bde"),
        MarbleCase(name: "leading+trailing, interval 2", options: options(2, trailing: true), input: "abcdefghijk|", output: "a-b-d-f-h-j-k", superseded: "ceg" + "i"),
        MarbleCase(name: "leading+trailing, a single event has no trailing run", options: options(3, trailing: true), input: "a-----|", output: "a"),
        MarbleCase(name: "leading+trailing, two events", options: options(3, trailing: true), input: "ab----|", output: "a--b"),
        MarbleCase(name: "leading+trailing, quiet window closes", options: options(3, trailing: true), input: "a---b---|", output: "a---b"),
        // Trailing delivers the first event of the window.
        MarbleCase(name: "leading+trailing first", options: options(3, trailing: true, first: true), input: "abcd----|", output: "a--b--d", dropped: "c"),
        // Trailing only.
        MarbleCase(name: "trailing only latest", options: options(3, leading: false, trailing: true), input: "a-bc---d|", output: "---b--c--d", superseded: "a"),
        MarbleCase(name: "trailing only first", options: options(3, leading: false, trailing: true, first: true), input: "abc|", output: "---a", dropped: "bc"),
    ]

    @Test(arguments: marbles)
    func marble(_ c: MarbleCase) {
        let outcome = runMarble(c.input, Throttle(options: c.options))
        #expect(outcome.output == trimmed(c.output), "\(outcome.log)")
        #expect(outcome.superseded == c.superseded)
        #expect(outcome.dropped == c.dropped)
    }

    /// The leading-throttle rule: an event at t runs iff nothing ran in (t − I, t]; otherwise retryAfter = lastRun + I − t.
    @Test func buttonTapRetryAfter() throws {
        var tap = Throttle(options: try ThrottleOptions(interval: .seconds(1)))
        #expect(tap.event(EventToken(1), now: .ms(1_000)) == .run)
        #expect(tap.event(EventToken(2), now: .ms(1_250)) == .drop(retryAfter: .milliseconds(750)))
        #expect(tap.event(EventToken(3), now: .ms(1_999)) == .drop(retryAfter: .milliseconds(1)))
        #expect(tap.event(EventToken(4), now: .ms(2_000)) == .run)
        #expect(tap.event(EventToken(5), now: .ms(2_000)) == .drop(retryAfter: .seconds(1)))
        // Dropped taps do not extend the window.
        #expect(tap.event(EventToken(6), now: .ms(3_000)) == .run)
        #expect(tap.fire(now: .ms(9_000)) == FireDecision.none)
        #expect(tap.state.deadline == nil)
    }

    @Test func trailingRequestsOneTimerPerWindow() {
        var throttle = Throttle(options: Self.options(100, trailing: true))
        #expect(throttle.event(EventToken(1), now: .ms(0)) == .run)
        #expect(throttle.event(EventToken(2), now: .ms(10)) == .hold(schedule: .ms(100), superseded: nil))
        #expect(throttle.event(EventToken(3), now: .ms(20)) == .hold(schedule: nil, superseded: EventToken(2)))
        // An early (stale) fire asks to be called again at the window end.
        #expect(throttle.fire(now: .ms(50)) == .reschedule(.ms(100)))
        #expect(throttle.fire(now: .ms(100)) == .run(EventToken(3)))
        // The trailing run opened a new window [100, 200).
        #expect(throttle.event(EventToken(4), now: .ms(150)) == .hold(schedule: .ms(200), superseded: nil))
        #expect(throttle.fire(now: .ms(200)) == .run(EventToken(4)))
        #expect(throttle.fire(now: .ms(300)) == FireDecision.none)
        #expect(throttle.event(EventToken(5), now: .ms(300)) == .run)
    }

    /// A window holding an event stays open until its timer is delivered.
    @Test func lateTimerKeepsWindowOpen() {
        var throttle = Throttle(options: Self.options(100, trailing: true))
        _ = throttle.event(EventToken(1), now: .ms(0))
        _ = throttle.event(EventToken(2), now: .ms(50))
        #expect(throttle.event(EventToken(3), now: .ms(120)) == .hold(schedule: nil, superseded: EventToken(2)))
        #expect(throttle.fire(now: .ms(121)) == .run(EventToken(3)))
        #expect(throttle.event(EventToken(4), now: .ms(200)) == .hold(schedule: .ms(221), superseded: nil))
    }

    // lodash throttle.spec: "should support a `trailing` option".
    @Test func lodashTrailingOption() {
        var withTrailing = Throttle(options: Self.options(32, trailing: true))
        var withoutTrailing = Throttle(options: Self.options(32, trailing: false))
        #expect(withTrailing.event(EventToken(1), now: .ms(0)) == .run)
        #expect(withTrailing.event(EventToken(2), now: .ms(0)) == .hold(schedule: .ms(32), superseded: nil))
        #expect(withoutTrailing.event(EventToken(1), now: .ms(0)) == .run)
        #expect(withoutTrailing.event(EventToken(2), now: .ms(0)) == .drop(retryAfter: .milliseconds(32)))
        #expect(withTrailing.fire(now: .ms(32)) == .run(EventToken(2)))
        #expect(withoutTrailing.fire(now: .ms(32)) == FireDecision.none)
    }

    // lodash throttle.spec: "should trigger a call when invoked repeatedly and `leading` is false".
    @Test func lodashRepeatedCallsLeadingFalse() {
        let outcome = runMarble(String(repeating: "a", count: 100) + "|", Throttle(options: Self.options(32, leading: false, trailing: true)))
        let runs = outcome.output.filter { $0 == "a" }.count
        #expect(runs == 4, "\(outcome.output)")  // at 32, 64, 96, and the trailing one at 128
        #expect(outcome.output.first == "-")
    }

    @Test func idleStateExpires() throws {
        var state = ThrottleState()
        #expect(state.isIdle(at: .zero))
        _ = state.event(EventToken(1), now: .ms(10), options: try ThrottleOptions(interval: .seconds(1)))
        #expect(!state.isIdle(at: .ms(1_009)))
        #expect(state.isIdle(at: .ms(1_010)))
        #expect(MemoryLayout<ThrottleState>.size <= 24)
    }
}
