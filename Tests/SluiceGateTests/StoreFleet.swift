import Sluice
import SluicePluginTesting

/// Two gates (two instances) of one plugin sharing one store, on manual clocks: the store reads
/// `a`'s clock, and ``advance(by:)`` moves `a`'s and `b`'s together.
struct StoreFleet<Store: SharedStore>: Sendable {
    let a: GateHarness
    let b: GateHarness
    let store: Store

    /// A fleet of two instances of the plugin `make` builds, on the store `makeStore` builds
    /// over a memory store that reads `a`'s clock, with their handles.
    static func make<Plugin: GatePlugin>(
        store makeStore: (MemoryStore) -> Store, mode: StoreFailureMode = .closed, instances: Int = 2,
        _ make: () throws -> Plugin
    ) throws -> (StoreFleet, PluginHandle<Plugin>, PluginHandle<Plugin>) {
        let clock = ManualGateClock()
        let store = makeStore(MemoryStore(now: { clock.now }))
        var pluginsA = PluginRegistry()
        var pluginsB = PluginRegistry()
        let shared = try PluginStore.shared(store, whenUnavailable: mode, instances: instances)
        let handleA = try pluginsA.register(try make(), store: shared)
        let handleB = try pluginsB.register(try make(), store: shared)
        let a = try GateHarness(plugins: pluginsA, clock: clock)
        let b = try GateHarness(plugins: pluginsB)
        return (StoreFleet(a: a, b: b, store: store), handleA, handleB)
    }

    func advance(by duration: Duration) async {
        await a.advance(by: duration)
        await b.advance(by: duration)
    }

    func settle() async {
        await a.settle()
        await b.settle()
    }

    func shutdown() {
        a.shutdown()
        b.shutdown()
    }
}
