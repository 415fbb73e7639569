import SluiceCore

/// One stage of a request's chain that a shared store decides: what it limits, the key it counts
/// under, and whether it runs in shadow mode.
///
/// The gate makes them from a plugin's policy (a throttle or a rate limit decided by the store)
/// and its limit chain (``GatePlugin/limits``), in order, and asks the store to decide them all or
/// none (``SharedStore/admit(_:cost:owner:on:_:)``).
public struct StoreStage: Sendable, Hashable {
    /// What a stage limits.
    public enum Limit: Sendable, Hashable {
        /// A leading-only throttle: a request runs when no window of the key is open, and opens
        /// one of `interval`.
        case throttle(interval: Duration)
        /// A GCRA rate limit: a request spends its cost.
        case rate(RateLimitOptions)
        /// At most `limit` executions of the key in flight, each holding its slot for `lease`
        /// unless renewed (``SharedStore/renewSlots(_:owner:on:_:)``): the slots of an instance
        /// that stopped come free by themselves.
        case concurrency(limit: Int, lease: Duration)
    }

    /// Whose stage it is: the plugin's name, then `/` and the stage's name for a stage of its
    /// limit chain. Keys of different scopes never meet.
    public let scope: String
    /// The key the stage counts under (an account, a client address): stages of one request
    /// that share it share a place in the store (a Redis hash slot), and can be decided in one
    /// step.
    public let key: String
    /// What it limits.
    public let limit: Limit
    /// In shadow mode a stage decides and reports, and never refuses or takes anything.
    public let shadow: Bool

    /// A stage of `scope` counting under `key`.
    public init(scope: String, key: String, limit: Limit, shadow: Bool = false) {
        self.scope = scope
        self.key = key
        self.limit = limit
        self.shadow = shadow
    }

    /// The stage's key in the store's own terms.
    public var storeKey: StoreKey { StoreKey(plugin: scope, key: key) }
}
