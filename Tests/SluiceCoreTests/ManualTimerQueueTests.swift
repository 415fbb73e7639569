import SluiceCore
import SluiceTesting
import Testing

@Suite struct ManualTimerQueueTests {
    @Test func firesInDeadlineOrderAndMovesTheClock() {
        var queue = ManualTimerQueue<String>(start: .ms(10))
        queue.schedule(at: .ms(30), "c")
        queue.schedule(at: .ms(20), "a")
        queue.schedule(at: .ms(20), "b")  // same deadline: in scheduling order
        queue.schedule(at: .ms(5), "overdue")
        var fired: [String] = []
        queue.advance(to: .ms(25)) { queue, now, payload in
            fired.append("\(payload)@\(now.nanoseconds / 1_000_000)")
            if payload == "a" { queue.schedule(at: .ms(22), "follow-up") }
        }
        #expect(fired == ["overdue@10", "a@20", "b@20", "follow-up@22"])
        #expect(queue.now == .ms(25))
        #expect(queue.nextDeadline == .ms(30))
        #expect(queue.popDue() == nil)
        queue.advance(by: .milliseconds(10)) { _, _, payload in fired.append(payload) }
        #expect(fired.last == "c")
        #expect(queue.count == 0)
    }

    @Test func manualClock() {
        var clock = ManualClock()
        clock.advance(by: .seconds(2))
        #expect(clock.now == .ms(2_000))
        clock.advance(to: .ms(1_000))  // never backwards
        #expect(clock.now == .ms(2_000))
    }
}
