import SluiceCore

/// Where a plugin keeps its policy's state, chosen when it is registered
/// (`PluginRegistry.register(_:budget:tallyBudget:store:)`).
///
/// ```swift
/// let store = RedisStore(endpoint: try RedisEndpoint(url: "redis://10.0.0.5:6379"), group: group)
/// try plugins.register(
///     paymentPlugin, store: .shared(store, whenUnavailable: .closed, instances: 3))
/// ```
///
/// Shared state exists for the policies whose state says what other instances may do: a
/// leading-only ``GatePolicy/throttle(_:)``, ``GatePolicy/rateLimit(_:)`` and
/// ``GatePolicy/idempotent(_:)``; an idempotent plugin's output must be `Codable`, since the
/// store keeps its results.
public struct PluginStore: Sendable {
    /// The shared store, or `nil` for this process's memory.
    public let shared: (any SharedStore)?
    /// What happens when the shared store does not answer.
    public let whenUnavailable: StoreFailureMode
    /// How many instances share the store: in ``StoreFailureMode/local`` each decides with
    /// limits divided by this.
    public let instances: Int

    /// This process's memory: the tables of the shard that owns the key (the default).
    public static let memory = PluginStore(shared: nil, whenUnavailable: .closed, instances: 1)

    /// A shared store, used by `instances` processes, falling back as `whenUnavailable` says.
    ///
    /// - Throws: `SluiceError` with code `.invalidOption` when `instances` is below 1.
    public static func shared(
        _ store: any SharedStore, whenUnavailable: StoreFailureMode = .closed, instances: Int = 1
    ) throws(SluiceError) -> PluginStore {
        guard instances >= 1 else {
            throw SluiceError(code: .invalidOption, message: "the number of instances must be at least 1", value: "\(instances)")
        }
        return PluginStore(shared: store, whenUnavailable: whenUnavailable, instances: instances)
    }

    /// The policy each process decides with on its own in ``StoreFailureMode/local``: `policy`
    /// with its limits divided over ``instances`` (a throttle's window multiplied, a rate
    /// limit's count and burst divided, never below one request), and the same choice when its
    /// table is full.
    public func localPolicy(for policy: GatePolicy) throws(SluiceError) -> GatePolicy {
        guard shared != nil, instances > 1 else { return policy }
        switch policy {
        case .throttle(let options):
            return .throttle(
                try ThrottleOptions(
                    interval: options.interval * instances, leading: options.leading, trailing: options.trailing,
                    delivers: options.delivers, whenFull: options.whenFull))
        case .rateLimit(let options):
            let limit = max(1, options.limit / instances)
            return .rateLimit(
                try RateLimitOptions(
                    count: max(1, options.count / instances), per: options.period, burst: limit - 1, whenFull: options.whenFull))
        default:
            return policy
        }
    }
}
