import SluiceCore
import Testing

@Suite struct InstantTests {
    @Test func arithmetic() {
        let t = Instant(milliseconds: 5)
        #expect(t + .milliseconds(2) == Instant(milliseconds: 7))
        #expect(Instant(milliseconds: 7) - t == .milliseconds(2))
        #expect(t - .milliseconds(5) == .zero)
        #expect(Duration.seconds(1).nanosecondsClamped == 1_000_000_000)
    }
}
