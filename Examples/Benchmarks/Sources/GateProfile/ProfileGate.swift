import GateBenchPlugins
import Sluice
import SluiceButtonTap
import SluicePayment

/// A one-loop gate with the plugins `gate-profile` runs (TAP, PAY and the chained plugin), as
/// GateBenchmarks' harness registers them.
struct ProfileGate {
    let group: SluiceLoopGroup
    let gate: Gate
    let tap: PluginHandle<ButtonTapPlugin>
    let pay: PluginHandle<PaymentPlugin>
    let chain: PluginHandle<ChainedPlugin>

    /// `chainLimits` false registers the chained plugin without its limits.
    init(namePrefix: String, chainLimits: Bool = true) throws {
        group = try SluiceLoopGroup(loopCount: 1, namePrefix: namePrefix)
        var plugins = PluginRegistry()
        tap = try plugins.register(ButtonTapPlugin(window: .seconds(3600)), budget: .bytes(64 << 20))
        pay = try plugins.register(
            PaymentPlugin(retention: .seconds(3600), processor: SimulatedProcessor(latency: .zero)), budget: .bytes(64 << 20))
        chain = try plugins.register(try ChainedPlugin(withLimits: chainLimits), budget: .bytes(64 << 20))
        gate = try Gate(group: group, plugins: plugins)
    }

    /// Submits `count` requests (cycling through `requests`) on the loop in one job; returns the
    /// time that took.
    func submit<P: GatePlugin>(_ requests: [GateRequest<P>], _ count: Int) async -> Duration {
        let gate = self.gate
        return await group.loops[0].submit { () -> Duration in
            let start = ContinuousClock.now
            requests.withUnsafeBufferPointer { buffer in
                for index in 0..<count { _ = gate.submitNow(buffer[index % buffer.count], later: { { _ in } }) }
            }
            return ContinuousClock.now - start
        }
    }

    /// Waits until every started effect has ended.
    func waitForEffects() async {
        while await gate.statistics().executions > 0 { await group.loops[0].submit {} }
    }
}
