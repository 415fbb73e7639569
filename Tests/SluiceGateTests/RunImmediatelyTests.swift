import CoreMetrics
import MetricsTestKit
import Sluice
import SluiceButtonTap
import SluicePluginTesting
import Synchronization
import Testing

/// A plugin whose effect never suspends runs in place: the gate calls `runImmediately`, never
/// `run`, and holds nothing for it.
@Suite struct RunImmediatelyTests {
    final class Counts: Sendable {
        let inPlace = Atomic<Int>(0)
        let asTask = Atomic<Int>(0)
    }

    struct Counter: GatePlugin {
        let name = "counter"
        let policy: GatePolicy
        let counts = Counts()

        func key(for input: String) -> String { input }

        func run(_ input: String, context: EffectContext) async throws -> Int {
            counts.asTask.add(1, ordering: .relaxed).newValue
        }

        func runImmediately(_ input: String, context: EffectContext) throws -> Int? {
            if input == "task" { return nil }
            if input == "throw" { throw Failure() }
            return counts.inPlace.add(1, ordering: .relaxed).newValue
        }
    }

    struct Failure: Error {}

    @Test(arguments: [
        GatePolicy.unrestricted, .switchLatest, .throttle(.buttonTap),
        .rateLimit(try RateLimitOptions(count: 10, per: .seconds(1), burst: 5)),
    ])
    func anEffectThatNeverSuspendsRunsInPlace(policy: GatePolicy) async throws {
        let plugin = Counter(policy: policy)
        var plugins = PluginRegistry()
        let handle = try plugins.register(plugin)
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let outcome = await harness.gate.submit(handle, "key")
        #expect(outcome.output == 1)
        if case .rateLimit = policy { #expect(outcome.runInfo?.rateLimit?.remaining == 5) }
        #expect(plugin.counts.inPlace.load(ordering: .relaxed) == 1 && plugin.counts.asTask.load(ordering: .relaxed) == 0)
        // `nil` hands the request to `run`, as a task; a thrown error fails the request.
        #expect(await harness.gate.submit(handle, "task").output == 1)
        #expect(plugin.counts.asTask.load(ordering: .relaxed) == 1)
        #expect(await harness.gate.submit(handle, "throw").kind == "failed")
        let statistics = await harness.gate.statistics()
        #expect(statistics.executions == 0 && statistics.waiters == 0)
    }

    /// With a metrics backend, `sluice_effect_duration_seconds{plugin}` gets one value per
    /// effect, run in place or as a task (without one, the gate skips the clock reads).
    @Test func effectDurationsAreRecordedWithAMetricsBackend() async throws {
        let metrics = TestMetrics()
        try await withMetricsFactory(metrics) {
            let plugin = Counter(policy: .unrestricted)
            var plugins = PluginRegistry()
            let handle = try plugins.register(plugin)
            let harness = try GateHarness(plugins: plugins)
            defer { harness.shutdown() }
            #expect(await harness.gate.submit(handle, "key").output == 1)
            #expect(await harness.gate.submit(handle, "task").output == 1)
            #expect(await harness.gate.submit(handle, "key").output == 2)
            let timer = try metrics.expectTimer("sluice_effect_duration_seconds", [("plugin", "counter")])
            #expect(timer.values.count == 3)
            #expect(timer.values.allSatisfy { $0 >= 0 })
        }
    }
}
