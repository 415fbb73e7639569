import Sluice
import SluiceButtonTap
import SluiceLibevent
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// Sweeps, shard choice, tallies and the drain, with no listener anywhere.
@Suite struct GateLifecycleTests {
    @Test func idleKeysAreSweptWithoutAListener() async throws {
        var plugins = PluginRegistry()
        let tap = try plugins.register(ButtonTapPlugin(window: .seconds(1)))
        let harness = try GateHarness(plugins: plugins, loops: 2)
        defer { harness.shutdown() }
        for n in 0..<300 { _ = await harness.gate.submit(tap, "user:\(n)") }
        #expect(await harness.gate.statistics().keys == 300)
        await harness.advance(by: .milliseconds(999))
        #expect(await harness.gate.statistics().keys == 300)
        // Once their window is over the keys no longer matter; the periodic sweeps drop them.
        await harness.advance(by: .milliseconds(501))
        #expect(await harness.gate.statistics().keys == 0)
        #expect(await harness.gate.statistics().tables["tap"]?.expired == 300)
    }

    @Test func theShardOfAKeyIsAStableHash() async throws {
        var plugins = PluginRegistry()
        try plugins.register(ButtonTapPlugin())
        let harness = try GateHarness(plugins: plugins, loops: 4)
        defer { harness.shutdown() }
        // From an independent FNV-1a + fmix64: the same in every process.
        #expect(harness.gate.shardIndex(forKey: "user42") == 2)
        #expect(harness.gate.shardIndex(forKey: "k") == 1)
        #expect(harness.gate.loop(forKey: "k") === harness.group.loops[1])
    }

    @Test func tapTalliesLiveInTheShardAndAreBounded() async throws {
        var plugins = PluginRegistry()
        let tap = try plugins.register(ButtonTapPlugin(window: .milliseconds(10)), tallyBudget: .entries(2))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let gate = harness.gate
        #expect(await gate.submit(tap, "a").output == 1)
        await harness.advance(by: .milliseconds(10))
        #expect(await gate.submit(tap, "a").output == 2)
        #expect(await gate.submit(tap, "b").output == 1)
        // A third key evicts a tally not used again since it was made (b's: a's was), which
        // starts over; a's keeps counting.
        #expect(await gate.submit(tap, "c").output == 1)
        await harness.advance(by: .milliseconds(10))
        #expect(await gate.submit(tap, "a").output == 3)
        #expect(await gate.submit(tap, "b").output == 1)
        #expect(tap.plugin.taps.current == 6)
    }

    @Test func aShutdownWaitsForEffectsThenCancelsAndAnswersTheRest() async throws {
        var plugins = PluginRegistry()
        let quick = try plugins.register(ProbePlugin("quick", policy: .unrestricted, sleeping(.milliseconds(100))))
        let slow = try plugins.register(ProbePlugin("slow", policy: .unrestricted, sleeping(.seconds(10))))
        let held = try plugins.register(
            ProbePlugin("held", policy: .debounce(try DebounceOptions(quiet: .seconds(60)), cancelInFlight: false), immediate))
        let harness = try GateHarness(plugins: plugins, loops: 2)
        defer { harness.shutdown() }
        let gate = harness.gate
        let a = await gate.start(gate.request(quick, Probe(key: "a", payload: "done")))
        let b = await gate.start(gate.request(slow, Probe(key: "b")))
        let c = await gate.start(gate.request(held, Probe(key: "c")))
        let drained = Task { await gate.shutdown(gracePeriod: .seconds(1)) }
        // Only a hang fails this wait: in a full parallel run a new task has been seen to start
        // more than 10 s late on two cores.
        try await pollUntil(seconds: 60) { !gate.isAcceptingRequests }
        #expect(await gate.submit(quick, Probe(key: "a")).kind == "shuttingDown")
        await harness.advance(by: .milliseconds(100))
        #expect(try await a.settledOutcome().output == "done")
        await harness.advance(by: .milliseconds(900))
        await drained.value
        #expect(try await b.settledOutcome().kind == "cancelled(shutdown)")
        #expect(try await c.settledOutcome().kind == "cancelled(shutdown)")
        let statistics = await gate.statistics()
        #expect(statistics.executions == 0 && statistics.waiters == 0)
        harness.group.shutdownGracefully()
        // After the loops stopped, nothing traps: requests are refused.
        #expect(await gate.submit(quick, Probe(key: "a")).kind == "shuttingDown")
        #expect(await gate.cancel(id: "quick", key: "a") == 0)
    }

    @Test func anEffectResumedAfterItsLoopStoppedDoesNotTrap() async throws {
        let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resumed = Atomic<Bool>(false)
        var plugins = PluginRegistry()
        let stubborn = try plugins.register(ProbePlugin<String>(policy: .unrestricted) { _, context in
            // Ignores cancellation: waits for the test to let it go, then touches its context.
            await withCheckedContinuation { continuation in release.withSanitizedLock { $0 = continuation } }
            _ = context.incrementTally()
            _ = context.now
            try? await context.sleep(for: .milliseconds(1))
            resumed.store(true, ordering: .releasing)
            return "late"
        })
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let ticket = await harness.gate.start(harness.gate.request(stubborn, Probe(key: "k")))
        try await pollUntil { release.withSanitizedLock { $0 != nil } }
        await harness.gate.shutdown(gracePeriod: .zero)
        #expect(try await ticket.settledOutcome().kind == "cancelled(shutdown)")
        harness.group.shutdownGracefully()
        release.withSanitizedLock { $0 }?.resume()
        try await pollUntil { resumed.load(ordering: .acquiring) }
    }
}
