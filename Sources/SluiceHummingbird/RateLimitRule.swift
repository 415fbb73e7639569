#if Hummingbird
import Sluice
import SluiceHTTP

/// A GCRA rate limit registered in a `PluginRegistry`, which ``RateLimitMiddleware`` decides
/// with on a shared `Gate`.
///
/// Register every rule before making the gate (the gate's plugins are fixed when it is made);
/// one rule may serve several middleware values and routes, which then share its keys' quotas.
public struct RateLimitRule: Sendable {
    /// The plugin the gate decides with.
    let handle: PluginHandle<KeyRateLimitPlugin>
    /// The `RateLimit-Policy` and `RateLimit` fields of the rule.
    public let fields: RateLimitFields
    /// The limit.
    public let limit: RateLimitOptions
    /// Whether the rule only reports: a request over the limit gets the fields (and is counted
    /// in `shadowLimited` and in the gate's `sluice_decisions_total{outcome="limited"}`), but
    /// it passes through and is never refused.
    public let shadowMode: Bool
    /// Requests over the limit that shadow mode let through (`sluice_<name>_shadow_limited_total`).
    public let shadowLimited: PluginCounter

    /// Registers a rate limit named `name` in `plugins`.
    ///
    /// - Parameters:
    ///   - name: the plugin's name and the policy's name in the fields: 1–64 characters of
    ///     `a–z 0–9 _ - .`, unique in the registry.
    ///   - limit: the GCRA limit per key: `count` per `period`, `burst` more back to back.
    ///   - shadowMode: report only (fields and metrics), never refuse.
    ///   - store: where the limit's state lives (this process, or a shared store).
    ///   - plugins: the registry the gate will be made from.
    /// - Throws: `GateError` when the name is malformed or taken, or the store cannot hold the
    ///   limit.
    public init(
        name: String, limit: RateLimitOptions, shadowMode: Bool = false, store: PluginStore = .memory,
        in plugins: inout PluginRegistry
    ) throws(GateError) {
        try RuleName.check(name)
        handle = try plugins.register(KeyRateLimitPlugin(name: name, options: limit), store: store)
        fields = .gcra(name: name, options: limit)
        self.limit = limit
        self.shadowMode = shadowMode
        shadowLimited = PluginCounter("\(name)_shadow_limited")
    }
}
#endif
