import Sluice
import SluiceBuiltInCodecs
import SluiceButtonTap
import SluiceLineProtocol
import SluicePluginTesting
import Testing

/// ButtonTap and its line codec on a manual clock, without sockets.
@Suite struct ButtonTapPluginTests {
    private func harness(window: Duration = .seconds(1)) throws -> LineHarness {
        var plugins = PluginRegistry()
        var verbs = LineVerbs()
        let tap = try plugins.register(ButtonTapPlugin(window: window))
        try verbs.register(TapLineCodec(tap.plugin), for: tap)
        return try LineHarness(plugins: plugins, verbs: verbs)
    }

    @Test func theButtonTapPresetRunsOneTapASecondOnItsLeadingEdge() throws {
        #expect(ThrottleOptions.buttonTap.interval == .seconds(1))
        #expect(ThrottleOptions.buttonTap.leading && !ThrottleOptions.buttonTap.trailing)
        #expect(try ButtonTapPlugin().policy == .throttle(.buttonTap))
    }

    @Test func firstTapInAWindowRunsTheOthersAreThrottledToItsEnd() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request("1 TAP k") == "1 OK tap=1")
        #expect(await client.request("2 TAP k") == "2 THROTTLED retry-after-ms=1000")
        await harness.advance(by: .milliseconds(400))
        #expect(await client.request("3 TAP k") == "3 THROTTLED retry-after-ms=600")
        await harness.advance(by: .milliseconds(599))
        #expect(await client.request("4 TAP k") == "4 THROTTLED retry-after-ms=1")
        await harness.advance(by: .milliseconds(1))
        // Exactly one window after the run: (t − I, t] no longer holds it.
        #expect(await client.request("5 TAP k") == "5 OK tap=2")
    }

    @Test func retryAfterRoundsUpToWholeMilliseconds() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request("1 TAP k") == "1 OK tap=1")
        await harness.advance(by: .microseconds(999_500))
        #expect(await client.request("2 TAP k") == "2 THROTTLED retry-after-ms=1")
    }

    @Test func keysAreIndependentAndCountsArePerKey() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request("1 TAP a") == "1 OK tap=1")
        #expect(await client.request("2 TAP b") == "2 OK tap=1")
        #expect(await client.request("3 TAP a")?.hasPrefix("3 THROTTLED") == true)
        await harness.advance(by: .seconds(1))
        #expect(await client.request("4 TAP a") == "4 OK tap=2")
        #expect(await client.request("5 STATS")?.hasPrefix("5 OK taps=3 ") == true)
    }

    @Test func keysAreSharedAcrossConnections() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let first = await harness.connect()
        let second = await harness.connect()
        #expect(await first.request("1 TAP k") == "1 OK tap=1")
        #expect(await second.request("1 TAP k") == "1 THROTTLED retry-after-ms=1000")
    }

    @Test(arguments: ["1 TAP", "1 TAP a b", "1 TAP " + String(repeating: "k", count: 129), "1 TAP caf\u{e9}"])
    func badKeysAreUsageErrors(line: String) async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request(line) == "1 ERR usage TAP")
    }
}
