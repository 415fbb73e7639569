import Sluice
import SluicePluginTesting
import SluiceSearch
import SluiceTestSupport
import Testing

/// One advance of the manual clock covers a timer and what it starts: a debounce timer armed
/// by a caller off the loops fires on the advancing task, the search it starts runs on the
/// key's loop, and that search's sleep, armed there a few jobs later, comes due within the same
/// advance. (Before the clock waited for the gate's loops after each timer, the sleep could be
/// armed after the advance had moved the clock past it and never fire: the request then hung.)
@Suite struct ManualClockAdvanceTests {
    @Test(arguments: [1, 2])
    func oneAdvanceRunsADebouncedSearchAndItsSleep(loops: Int) async throws {
        var plugins = PluginRegistry()
        let search = try plugins.register(SearchPlugin(quiet: .milliseconds(100), maxWait: .seconds(1), latency: .milliseconds(30)))
        let harness = try GateHarness(plugins: plugins, loops: loops)
        defer { harness.shutdown() }
        let gate = harness.gate
        for round in 0..<20 {
            let ticket = await gate.start(gate.request(search, SearchPlugin.Search(key: "k\(round)", query: "q\(round)")))
            // 100 ms of quiet, then 30 ms of search: both within this one advance.
            await harness.clock.advance(by: .milliseconds(130))
            try await pollUntil { ticket.resolvedOutcome != nil }
            #expect(try await ticket.settledOutcome().output == "q\(round)")
        }
    }
}
