#if Hummingbird
import Sluice
import SluiceHTTPCodec

/// A throttle registered in a `PluginRegistry` (the first request of each window per key runs,
/// the others are refused), which ``ThrottleMiddleware`` decides with on a shared `Gate`.
public struct ThrottleRule: Sendable {
    /// The rule's plugin in the gate.
    let handle: PluginHandle<KeyRulePlugin>
    /// The fields of the rule: `RateLimit-Policy: "<name>";q=1;w=<window>`.
    public let fields: RateLimitFields
    /// The answers it refused with lately, kept to answer a flood without making each again.
    let refusals: RefusalResponses
    /// The window.
    public let window: Duration

    /// A throttle named `name`: one request per `window` per key, registered in `plugins` and
    /// decided by the gate on the thread that handles the request (no hop).
    ///
    /// - Parameters:
    ///   - name: the policy's name in the fields (and the plugin's, on the gate): 1–64
    ///     characters of `a–z 0–9 _ - .`; on the gate, unique in the registry.
    ///   - window: the window; a key's first request in it wins.
    ///   - store: where the throttle's state lives: this process's memory, or a shared store.
    ///   - budget: the memory its keys may hold in this process (when full of live keys, one not
    ///     used lately is evicted and forgotten).
    ///   - plugins: the registry the gate will be made from.
    /// - Throws: `SluiceError` when the name is malformed or taken, the window is not positive,
    ///   or the budget cannot hold a key.
    public init(
        name: String, window: Duration, store: PluginStore = .memory, budget: MemoryBudget = .bytes(16 << 20),
        in plugins: inout PluginRegistry
    ) throws(SluiceError) {
        try RuleName.check(name)
        let options = try ThrottleOptions(interval: window, leading: true, trailing: false)
        handle = try plugins.register(KeyRulePlugin(name: name, policy: .throttle(options)), budget: budget, store: store)
        fields = .throttle(name: name, window: window)
        refusals = RefusalResponses(limits: fields)
        self.window = window
    }

    /// Decides about a request for `key`.
    func decide(_ key: String, on gate: Gate) async -> GateOutcome<Void> {
        await gate.submit(handle, key)
    }
}
#endif
