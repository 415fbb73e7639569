import SluiceCore
import Testing

@Suite struct DebounceTests {
    static func options(_ quiet: Int64, maxWait: Int64? = nil, leading: Bool = false, trailing: Bool = true) -> DebounceOptions {
        try! DebounceOptions(quiet: .milliseconds(quiet), maxWait: maxWait.map { .milliseconds($0) }, leading: leading, trailing: trailing)
    }

    typealias MarbleCase = MarbleDiagram<DebounceOptions>

    static let marbles: [MarbleCase] = [
        // swift-async-algorithms TestDebounce, same diagrams and same results.
        MarbleCase(name: "async-algorithms delayingValues", options: options(3), input: "abcd----e---f-g----|", output: "------d----e-----g-|", superseded: "abcf"),
        MarbleCase(name: "async-algorithms dangling last", options: options(3), input: "abcd----e---f-g-|", output: "------d----e-----g", superseded: "abcf"),
        MarbleCase(name: "single event", options: options(3), input: "a|", output: "---a"),
        // Leading only: the first event of a burst runs, the rest are dropped and extend the burst.
        MarbleCase(name: "leading only", options: options(3, leading: true, trailing: false), input: "ab-c----d|", output: "a-------d", dropped: "bc"),
        // Leading + trailing: a trailing run only if the burst had ≥ 2 events.
        MarbleCase(name: "leading+trailing", options: options(3, leading: true), input: "abc-----d----|", output: "a----c--d", superseded: "b"),
        MarbleCase(name: "leading+trailing single", options: options(3, leading: true), input: "a|", output: "a"),
        // maxWait: a continuous burst still runs every maxWait.
        MarbleCase(name: "maxWait 5, quiet 3", options: options(3, maxWait: 5), input: "abcdefghij|", output: "-----e----j", superseded: "abcdfghi"),
        MarbleCase(name: "maxWait equal to quiet", options: options(3, maxWait: 3), input: "abcdefg|", output: "---c--f--g", superseded: "abde"),
        MarbleCase(name: "maxWait with leading", options: options(3, maxWait: 5, leading: true), input: "abcdefghij|", output: "a----e----j", superseded: "bcdfghi"),
        MarbleCase(name: "leading only with maxWait", options: options(3, maxWait: 5, leading: true, trailing: false), input: "abcdefghijklm|", output: "a----f----k", dropped: "bcdeghijlm"),
    ]

    @Test(arguments: marbles)
    func marble(_ c: MarbleCase) {
        let outcome = runMarble(c.input, Debounce(options: c.options))
        #expect(outcome.output == trimmed(c.output), "\(outcome.log)")
        #expect(outcome.superseded == c.superseded)
        #expect(outcome.dropped == c.dropped)
    }

    /// Search-as-you-type: quiet for 100 ms, at most a second of waiting.
    static func searchOptions() throws -> DebounceOptions {
        try DebounceOptions(quiet: .milliseconds(100), maxWait: .seconds(1))
    }

    @Test func searchAsYouType() throws {
        var search = Debounce(options: try Self.searchOptions())
        #expect(search.event(EventToken(1), now: .ms(0)) == .hold(schedule: .ms(100), superseded: nil))
        #expect(search.event(EventToken(2), now: .ms(60)) == .hold(schedule: nil, superseded: EventToken(1)))
        // The timer at 100 is stale: the quiet period now ends at 160.
        #expect(search.fire(now: .ms(100)) == .reschedule(.ms(160)))
        #expect(search.fire(now: .ms(160)) == .run(EventToken(2)))
        #expect(search.fire(now: .ms(260)) == FireDecision.none)
        #expect(search.state.isIdle(at: .ms(260)))
    }

    /// Typing every 50 ms for 3 s: the latest query still runs at least once per second.
    @Test func searchMaxWaitUnderContinuousTyping() throws {
        let input = String(repeating: "q", count: 60) + "|"
        let outcome = runMarble(input, Debounce(options: try Self.searchOptions()), tick: .milliseconds(50))
        let runTicks = outcome.output.enumerated().filter { $0.element == "q" }.map(\.offset)
        // maxWait runs at 1 s and 2 s; the last key (2.95 s) runs at 3 s, when maxWait (from the 2 s
        // run) comes before its quiet end (3.05 s).
        #expect(runTicks == [20, 40, 60], "\(outcome.output)")
    }

    // lodash debounce.spec: "should support a `leading` option".
    @Test func lodashLeadingOption() {
        var withLeading = Debounce(options: Self.options(32, leading: true, trailing: false))
        #expect(withLeading.event(EventToken(1), now: .ms(0)) == .run)
        var withLeadingAndTrailing = Debounce(options: Self.options(32, leading: true))
        #expect(withLeadingAndTrailing.event(EventToken(1), now: .ms(0)) == .run)
        #expect(withLeadingAndTrailing.event(EventToken(2), now: .ms(0)) == .hold(schedule: .ms(32), superseded: nil))
        #expect(withLeadingAndTrailing.fire(now: .ms(32)) == .run(EventToken(2)))
        // After the burst, leading runs again.
        #expect(withLeading.event(EventToken(3), now: .ms(64)) == .run)
    }

    // lodash debounce.spec: "should support a `maxWait` option" (wait 32, maxWait 64).
    @Test func lodashMaxWait() {
        var debounce = Debounce(options: Self.options(32, maxWait: 64))
        var runs = 0
        var timers: [Instant] = []
        for t in stride(from: Int64(0), to: 128, by: 16) {
            while let due = timers.first, due <= .ms(t) {
                timers.removeFirst()
                switch debounce.fire(now: due) {
                case .run: runs += 1
                case .reschedule(let next): timers.append(next)
                case .none: break
                }
            }
            if case .hold(let schedule?, _) = debounce.event(EventToken(UInt64(t)), now: .ms(t)) { timers.append(schedule) }
        }
        #expect(runs == 1)  // at 64
        #expect(timers == [.ms(128)])
    }

    @Test func supersededAtTheMomentOfReplacement() {
        var debounce = Debounce(options: Self.options(100))
        #expect(debounce.event(EventToken(7), now: .ms(0)) == .hold(schedule: .ms(100), superseded: nil))
        #expect(debounce.state.pending == EventToken(7))
        #expect(debounce.event(EventToken(8), now: .ms(1)) == .hold(schedule: nil, superseded: EventToken(7)))
        #expect(debounce.state.pending == EventToken(8))
        #expect(debounce.state.deadline == .ms(101))
    }

    /// A held event stays held until its timer is delivered, even if an event arrives first.
    @Test func lateTimerStillSupersedes() {
        var debounce = Debounce(options: Self.options(100))
        #expect(debounce.event(EventToken(1), now: .ms(0)) == .hold(schedule: .ms(100), superseded: nil))
        // The timer for 100 ms has not been delivered yet when an event arrives at 150 ms.
        #expect(debounce.event(EventToken(2), now: .ms(150)) == .hold(schedule: nil, superseded: EventToken(1)))
        #expect(debounce.fire(now: .ms(151)) == .reschedule(.ms(250)))
        #expect(debounce.fire(now: .ms(250)) == .run(EventToken(2)))
    }
}
