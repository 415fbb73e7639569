import Sluice
import SluicePage
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// Single-flight through the typed API: joiners share one execution, which is cancelled only
/// once its last waiter has gone.
@Suite struct GateSingleFlightTests {
    private func harness() throws -> (GateHarness, PluginHandle<PagePlugin>) {
        var plugins = PluginRegistry()
        let page = try plugins.register(PagePlugin(latency: .milliseconds(50), pageSize: 2))
        return (try GateHarness(plugins: plugins), page)
    }

    @Test func joinersShareTheLeadersLoad() async throws {
        let (harness, page) = try harness()
        defer { harness.shutdown() }
        let gate = harness.gate
        let leader = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 3)))
        let joiner = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 3)))
        let otherPage = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 4)))
        await harness.advance(by: .milliseconds(50))
        let led = try await leader.settledOutcome()
        let shared = try await joiner.settledOutcome()
        #expect(led.kind == "ran" && shared.kind == "joined")
        #expect(led.output == shared.output)
        #expect(led.output?.items == ["feed-6", "feed-7"])
        #expect(try await otherPage.settledOutcome().output?.number == 4)
        #expect(page.plugin.loads.current == 2)
        // Nothing is kept: the next request loads again.
        let next = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 3)))
        await harness.advance(by: .milliseconds(50))
        #expect(try await next.settledOutcome().kind == "ran")
    }

    @Test func theLoadIsCancelledOnlyWhenItsLastWaiterLeaves() async throws {
        let (harness, page) = try harness()
        defer { harness.shutdown() }
        let gate = harness.gate
        let scopes = (0..<3).map { _ in gate.openScope() }
        var tickets: [GateTicket<PagePlugin.Page>] = []
        for scope in scopes {
            tickets.append(await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 1), in: scope)))
        }
        // The leader's connection goes first: the others still wait, the load goes on.
        gate.close(scopes[0])
        #expect(try await tickets[0].settledOutcome().kind == "cancelled(scopeClosed)")
        tickets[1].cancel()
        #expect(try await tickets[1].settledOutcome().kind == "cancelled(requested)")
        #expect(await gate.statistics().executions == 1)
        #expect(tickets[2].resolvedOutcome == nil)
        // The last one leaves: now the load is cancelled.
        gate.close(scopes[2])
        #expect(try await tickets[2].settledOutcome().kind == "cancelled(scopeClosed)")
        try await pollUntil { await gate.statistics().executions == 0 }
        await harness.advance(by: .milliseconds(50))
        #expect(page.plugin.loads.current == 0)
        // A new request leads a new load.
        let fresh = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 1)))
        await harness.advance(by: .milliseconds(50))
        #expect(try await fresh.settledOutcome().kind == "ran")
    }

    @Test func aWaiterLeavingDoesNotFailTheOthers() async throws {
        let (harness, page) = try harness()
        defer { harness.shutdown() }
        let gate = harness.gate
        let leaving = gate.openScope()
        let leader = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 0), in: leaving))
        let staying = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 0)))
        gate.close(leaving)
        #expect(try await leader.settledOutcome().kind == "cancelled(scopeClosed)")
        await harness.advance(by: .milliseconds(50))
        let outcome = try await staying.settledOutcome()
        #expect(outcome.kind == "joined" && outcome.output?.items == ["feed-0", "feed-1"])
    }

    @Test func cancellingTheLoadByKeyAnswersEveryWaiter() async throws {
        let (harness, page) = try harness()
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 2)))
        let b = await gate.start(gate.request(page, PagePlugin.PageRequest(key: "feed", page: 2)))
        #expect(await gate.cancel(id: "page", key: "feed") == 1)
        #expect(try await a.settledOutcome().kind == "cancelled(requested)")
        #expect(try await b.settledOutcome().kind == "cancelled(requested)")
        #expect(page.plugin.loads.current == 0)
    }
}
