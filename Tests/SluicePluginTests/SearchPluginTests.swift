import Sluice
import SluiceBuiltInCodecs
import SluiceLineProtocol
import SluicePluginTesting
import SluiceSearch
import Testing

/// Search (debounce + switch-latest) and its line codec on a manual clock, without sockets.
@Suite struct SearchPluginTests {
    private func harness() throws -> LineHarness {
        var plugins = PluginRegistry()
        var verbs = LineVerbs()
        let search = try plugins.register(SearchPlugin(quiet: .milliseconds(100), maxWait: .milliseconds(300), latency: .milliseconds(30)))
        try verbs.register(SearchLineCodec(search.plugin), for: search)
        return try LineHarness(plugins: plugins, verbs: verbs)
    }

    @Test func theSearchPresetWaitsForAQuietTenthOfASecondAndAtMostASecond() {
        #expect(DebounceOptions.search.quiet == .milliseconds(100))
        #expect(DebounceOptions.search.maxWait == .seconds(1))
    }

    @Test func aBurstRunsOnlyItsLastSearch() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 SEARCH k s")
        await harness.advance(by: .milliseconds(40))
        #expect(await client.request("2 SEARCH k sw") == nil)
        #expect(client.takeReply(to: "1") == "1 SUPERSEDED")  // at once
        await harness.advance(by: .milliseconds(40))
        await client.send("3 SEARCH k swi")
        #expect(client.takeReply(to: "2") == "2 SUPERSEDED")
        await harness.advance(by: .milliseconds(99))
        #expect(client.takeReplies().isEmpty)
        await harness.advance(by: .milliseconds(1))  // quiet: 3 starts
        await harness.advance(by: .milliseconds(30))  // and completes
        #expect(client.takeReplies() == ["3 OK results=swi"])
        #expect(await client.request("4 STATS")?.contains(" searches=1 ") == true)
    }

    @Test func maxWaitRunsAHeldSearchWhileTypingGoesOn() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        for index in 0..<6 {  // one every 60 ms: never quiet for 100 ms
            await client.send("\(index) SEARCH k q\(index)")
            await harness.advance(by: .milliseconds(60))
        }
        // By 300 ms after the first, the latest held one (q4, sent at 240) has started;
        // q5 (at 300) then cancelled it.
        #expect(await client.waitForReply(to: "4") == "4 CANCELLED")
        let replies = client.takeReplies()
        #expect(replies.filter { $0.hasSuffix("SUPERSEDED") }.count == 4)
        #expect(!replies.contains { $0.hasPrefix("5 ") })  // q5 is held
    }

    @Test func aNewerSearchCancelsTheRunningOne() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 SEARCH k first")
        await harness.advance(by: .milliseconds(110))  // started, 20 ms left
        await client.send("2 SEARCH k second")
        #expect(await client.waitForReply(to: "1") == "1 CANCELLED")
        await harness.advance(by: .milliseconds(130))
        #expect(client.takeReplies() == ["2 OK results=second"])
    }

    @Test func cancelReachesPendingAndRunningSearches() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 SEARCH k running")
        await harness.advance(by: .milliseconds(110))
        #expect(await client.request("2 CANCEL k search") == "2 OK cancelled=1")
        #expect(await client.waitForReply(to: "1") == "1 CANCELLED")
        await client.send("3 SEARCH k pending")
        #expect(await client.request("4 CANCEL k all") == "4 OK cancelled=1")
        #expect(await client.waitForReply(to: "3") == "3 CANCELLED")
        await harness.advance(by: .seconds(1))
        #expect(client.takeReplies().isEmpty)
        #expect(await client.request("5 CANCEL k search") == "5 OK cancelled=0")
    }

    @Test func closingTheConnectionCancelsItsSearches() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let leaving = await harness.connect()
        await leaving.send("1 SEARCH k q")
        await leaving.close()
        let other = await harness.connect()
        await harness.advance(by: .seconds(1))
        #expect(await other.request("2 STATS")?.contains(" searches=0 cancelled=1 ") == true)
    }

    @Test(arguments: ["1 SEARCH", "1 SEARCH k", "1 SEARCH k "])
    func aQueryIsRequired(line: String) async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request(line) == "1 ERR usage SEARCH")
    }

    @Test func theQueryIsTheRestOfTheLine() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 SEARCH k  two  spaces ")
        await harness.advance(by: .milliseconds(130))
        #expect(client.takeReplies() == ["1 OK results= two  spaces "])
    }
}
