#if Hummingbird
import Sluice
import SluiceHTTPCodec

/// A GCRA rate limit registered in a `PluginRegistry`, which ``RateLimitMiddleware`` decides
/// with on a shared `Gate`.
///
/// Register every rule before making the gate (the gate's plugins are fixed when it is made);
/// one rule may serve several middleware values and routes, which then share its keys' quotas.
public struct RateLimitRule: Sendable {
    /// The rule's plugin in the gate.
    let handle: PluginHandle<KeyRulePlugin>
    /// The `RateLimit-Policy` and `RateLimit` fields of the rule.
    public let fields: RateLimitFields
    /// The answers it refused with lately, kept to answer a flood without making each again.
    let refusals: RefusalResponses
    /// The limit.
    public let limit: RateLimitOptions
    /// Whether the rule only reports: a request over the limit gets the fields (and is counted
    /// in `shadowLimited` and in the gate's `sluice_decisions_total{outcome="limited"}`), but
    /// it passes through and is never refused.
    public let shadowMode: Bool
    /// Requests over the limit that shadow mode let through (`sluice_<name>_shadow_limited_total`).
    public let shadowLimited: PluginCounter
    /// Requests shadow mode let through undecided: the limit was busy or its shared store
    /// unavailable, the gate shutting down, or the decision cancelled
    /// (`sluice_<name>_shadow_undecided_total`).
    public let shadowUndecided: PluginCounter

    /// A rate limit named `name`, registered in `plugins` and decided by the gate on the thread
    /// that handles the request (no hop).
    ///
    /// - Parameters:
    ///   - name: the policy's name in the fields (and the plugin's, on the gate): 1–64
    ///     characters of `a–z 0–9 _ - .`; on the gate, unique in the registry.
    ///   - limit: the GCRA limit per key: `count` per `period`, `burst` more back to back.
    ///   - shadowMode: report only (fields and metrics), never refuse.
    ///   - store: where the limit's state lives: this process's memory, or a shared store.
    ///   - budget: the memory its keys may hold in this process, a summary of the keys it evicts
    ///     included (when full of live keys, one not used lately is evicted and its arrival time
    ///     remembered: see `WhenTableFull`).
    ///   - plugins: the registry the gate will be made from.
    /// - Throws: `SluiceError` when the name is malformed or taken, or the budget cannot hold a
    ///   key.
    public init(
        name: String, limit: RateLimitOptions, shadowMode: Bool = false, store: PluginStore = .memory,
        budget: MemoryBudget = .bytes(16 << 20), in plugins: inout PluginRegistry
    ) throws(SluiceError) {
        try RuleName.check(name)
        handle = try plugins.register(KeyRulePlugin(name: name, policy: .rateLimit(limit)), budget: budget, store: store)
        fields = .gcra(name: name, options: limit)
        refusals = RefusalResponses(limits: fields)
        self.limit = limit
        self.shadowMode = shadowMode
        shadowLimited = PluginCounter("\(name)_shadow_limited")
        shadowUndecided = PluginCounter("\(name)_shadow_undecided")
    }

    /// Decides about a request for `key`.
    func decide(_ key: String, on gate: Gate) async -> GateOutcome<Void> {
        await gate.submit(handle, key)
    }
}
#endif
