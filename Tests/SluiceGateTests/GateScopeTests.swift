import Sluice
import SluicePayment
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// Caller-chosen effect IDs and cancellation scopes, as TCA users know them.
@Suite struct GateScopeTests {
    enum CancelID: Hashable, Sendable {
        case search
        case upload
    }

    private func harness(loops: Int = 1, policy: GatePolicy = .unrestricted, latency: Duration = .seconds(1))
        throws -> (GateHarness, PluginHandle<ProbePlugin<String>>)
    {
        var plugins = PluginRegistry()
        let handle = try plugins.register(ProbePlugin(policy: policy, sleeping(latency)))
        return (try GateHarness(plugins: plugins, loops: loops), handle)
    }

    @Test func cancelByIDInAScopeReachesThatScopeAndItsChildrenOnly() async throws {
        let (harness, probe) = try harness()
        defer { harness.shutdown() }
        let gate = harness.gate
        let session = gate.openScope()
        let screen = gate.openScope(in: session)
        let otherSession = gate.openScope()
        let inSession = await gate.start(gate.request(probe, Probe(key: "a"), id: EffectID(CancelID.search), in: session))
        let inScreen = await gate.start(gate.request(probe, Probe(key: "b"), id: EffectID(CancelID.search), in: screen))
        let otherID = await gate.start(gate.request(probe, Probe(key: "c", payload: "upload"), id: EffectID(CancelID.upload), in: screen))
        let elsewhere = await gate.start(
            gate.request(probe, Probe(key: "a", payload: "elsewhere"), id: EffectID(CancelID.search), in: otherSession))
        #expect(await gate.cancel(id: CancelID.search, in: session) == 2)
        #expect(try await inSession.settledOutcome().kind == "cancelled(requested)")
        #expect(try await inScreen.settledOutcome().kind == "cancelled(requested)")
        await harness.advance(by: .seconds(1))
        #expect(try await otherID.settledOutcome().output == "upload")
        #expect(try await elsewhere.settledOutcome().output == "elsewhere")
    }

    @Test func cancelByIDAloneReachesEveryScopeOnEveryLoop() async throws {
        let (harness, probe) = try harness(loops: 2)
        defer { harness.shutdown() }
        let gate = harness.gate
        let session = gate.openScope()
        var tickets: [GateTicket<String>] = []
        for n in 0..<6 {
            tickets.append(await gate.start(gate.request(probe, Probe(key: "k\(n)"), id: EffectID(CancelID.upload), in: n < 3 ? session : nil)))
        }
        let kept = await gate.start(gate.request(probe, Probe(key: "k0", payload: "kept"), id: EffectID(CancelID.search)))
        #expect(await gate.cancel(id: CancelID.upload) == 6)
        for ticket in tickets { #expect(try await ticket.settledOutcome().kind == "cancelled(requested)") }
        await harness.advance(by: .seconds(1))
        #expect(try await kept.settledOutcome().output == "kept")
    }

    @Test func cancelByKeyReachesEveryScopeButOnlyThatID() async throws {
        let (harness, probe) = try harness(loops: 2)
        defer { harness.shutdown() }
        let gate = harness.gate
        let one = gate.openScope()
        let two = gate.openScope()
        let a = await gate.start(gate.request(probe, Probe(key: "user42"), id: "search", in: one))
        let b = await gate.start(gate.request(probe, Probe(key: "user42"), id: "search", in: two))
        let c = await gate.start(gate.request(probe, Probe(key: "user42", payload: "kept"), id: "upload", in: one))
        let d = await gate.start(gate.request(probe, Probe(key: "user7", payload: "kept"), id: "search", in: one))
        #expect(await gate.cancel(id: "search", key: "user42") == 2)
        #expect(try await a.settledOutcome().kind == "cancelled(requested)")
        #expect(try await b.settledOutcome().kind == "cancelled(requested)")
        await harness.advance(by: .seconds(1))
        #expect(try await c.settledOutcome().output == "kept")
        #expect(try await d.settledOutcome().output == "kept")
        // Every ID of the key.
        let e = await gate.start(gate.request(probe, Probe(key: "user42"), id: "x", in: one))
        let f = await gate.start(gate.request(probe, Probe(key: "user42"), id: "y", in: two))
        #expect(await gate.cancel(id: nil, key: "user42") == 2)
        #expect(try await e.settledOutcome().kind == "cancelled(requested)")
        #expect(try await f.settledOutcome().kind == "cancelled(requested)")
    }

    @Test func aCancelBeforeTheEffectStartsWins() async throws {
        let options = try DebounceOptions(quiet: .milliseconds(100))
        var plugins = PluginRegistry()
        let plugin = ProbePlugin(policy: .debounce(options, cancelInFlight: false), immediate)
        let probe = try plugins.register(plugin)
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        let held = await gate.start(gate.request(probe, Probe(key: "k"), id: "search"))
        #expect(await gate.cancel(id: "search", key: "k") == 1)
        #expect(try await held.settledOutcome().kind == "cancelled(requested)")
        await harness.advance(by: .seconds(1))
        #expect(plugin.counts.startedCount == 0)
    }

    @Test func closingAScopeCancelsWhatRunsInItAndBelowOnEveryLoop() async throws {
        let (harness, probe) = try harness(loops: 2)
        defer { harness.shutdown() }
        let gate = harness.gate
        let connection = gate.openScope()
        let child = gate.openScope(in: connection)
        var tickets: [GateTicket<String>] = []
        for n in 0..<8 {
            tickets.append(await gate.start(gate.request(probe, Probe(key: "k\(n)"), in: n.isMultiple(of: 2) ? connection : child)))
        }
        #expect(Set((0..<8).map { gate.shardIndex(forKey: "k\($0)") }).count == 2)
        let survivor = await gate.start(gate.request(probe, Probe(key: "k0", payload: "other scope")))
        gate.close(connection)
        for ticket in tickets { #expect(try await ticket.settledOutcome().kind == "cancelled(scopeClosed)") }
        #expect(connection.isClosed && child.isClosed)
        // A request in a closed scope is cancelled at once.
        #expect(await gate.submit(probe, Probe(key: "k1"), in: child).kind == "cancelled(scopeClosed)")
        await harness.advance(by: .seconds(1))
        #expect(try await survivor.settledOutcome().output == "other scope")
        let statistics = await gate.statistics()
        #expect(statistics.scopes == 0 && statistics.executions == 0 && statistics.waiters == 0)
    }

    @Test func anIdempotentExecutionLivesInTheKeysScope() async throws {
        let processor = CountingProcessor(latency: .seconds(1))
        var plugins = PluginRegistry()
        let pay = try plugins.register(PaymentPlugin(processor: processor))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        let connection = gate.openScope()
        let payment = PaymentPlugin.Payment(key: "acct", idem: "i-1", amount: 9)
        let leaving = await gate.start(gate.request(pay, payment, in: connection))
        gate.close(connection)
        #expect(try await leaving.settledOutcome().kind == "cancelled(scopeClosed)")
        await harness.advance(by: .seconds(1))
        // The charge went on; the retry replays it.
        #expect(processor.charges.current == 1)
        #expect(await gate.submit(pay, payment, in: gate.openScope()).kind == "replayed")
        // A cancel by key does reach it.
        let again = await gate.start(gate.request(pay, PaymentPlugin.Payment(key: "acct", idem: "i-2", amount: 9)))
        #expect(await gate.cancel(id: "pay", key: "acct") == 1)
        #expect(try await again.settledOutcome().kind == "cancelled(requested)")
        #expect(processor.charges.current == 1)
    }

    @Test func aCallerWhoseTaskIsCancelledLeavesAtOnce() async throws {
        let (harness, probe) = try harness()
        defer { harness.shutdown() }
        let gate = harness.gate
        let ticket = await gate.start(gate.request(probe, Probe(key: "k")))
        let waiting = Task { await ticket.outcome }
        waiting.cancel()
        #expect(await waiting.value.kind == "cancelled(callerCancelled)")
        // Its single execution was cancelled with it.
        try await pollUntil { await gate.statistics().executions == 0 }
        #expect(probe.plugin.counts.cancelledCount == 1)
    }
}
