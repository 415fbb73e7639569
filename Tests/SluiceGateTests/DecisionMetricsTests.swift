import CoreMetrics
import MetricsTestKit
import Sluice
import SluiceButtonTap
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// `sluice_decisions_total{plugin, outcome}`: a lane counts its outcomes where it decides them
/// and adds them to the counters on each sweep, on `Gate.statistics()` and when the gate drains.
@Suite struct DecisionMetricsTests {
    /// Runs `body` with a gate of one button-tap plugin (a 60 s window) whose instruments
    /// `metrics` records, and its handle.
    static func withTapGate(
        _ body: (GateHarness, PluginHandle<ButtonTapPlugin>, TestMetrics) async throws -> Void
    ) async throws {
        let metrics = TestMetrics()
        try await withMetricsFactory(metrics) {
            var plugins = PluginRegistry()
            let tap = try plugins.register(ButtonTapPlugin(window: .seconds(60)))
            let harness = try GateHarness(plugins: plugins)
            defer { harness.shutdown() }
            try await body(harness, tap, metrics)
        }
    }

    static func decisions(_ metrics: TestMetrics, _ outcome: String) throws -> Int64 {
        try metrics.expectCounter("sluice_decisions_total", [("plugin", "tap"), ("outcome", outcome)]).totalValue
    }

    @Test func statisticsReportsEveryDecisionMadeSinceTheLastSweep() async throws {
        try await Self.withTapGate { harness, tap, metrics async throws in
            #expect(await harness.gate.submit(tap, "k").kind == "ran")
            for _ in 0..<3 { #expect(await harness.gate.submit(tap, "k").kind == "throttled") }
            _ = await harness.gate.statistics()
            #expect(try Self.decisions(metrics, "executed") == 1)
            #expect(try Self.decisions(metrics, "throttled") == 3)
            // Reported once: a second report adds nothing.
            _ = await harness.gate.statistics()
            #expect(try Self.decisions(metrics, "throttled") == 3)
        }
    }

    @Test func theSweepReportsTheDecisions() async throws {
        try await Self.withTapGate { harness, tap, metrics async throws in
            #expect(await harness.gate.submit(tap, "a").kind == "ran")
            #expect(await harness.gate.submit(tap, "a").kind == "throttled")
            #expect(await harness.gate.submit(tap, "b").kind == "ran")
            // The shard's sweep (every `GateOptions.sweepInterval`) reports them.
            await harness.advance(by: GateOptions().sweepInterval)
            try await pollUntil { try Self.decisions(metrics, "executed") == 2 }
            #expect(try Self.decisions(metrics, "throttled") == 1)
        }
    }

    @Test func theDrainReportsTheLastDecisions() async throws {
        try await Self.withTapGate { harness, tap, metrics async throws in
            #expect(await harness.gate.submit(tap, "k").kind == "ran")
            #expect(await harness.gate.submit(tap, "k").kind == "throttled")
            await harness.gate.shutdown(gracePeriod: .zero)
            #expect(try Self.decisions(metrics, "executed") == 1)
            #expect(try Self.decisions(metrics, "throttled") == 1)
        }
    }
}
