import Sluice

/// A request of ``ChainedPlugin``: an account and a client address.
public struct ChainedCall: Sendable {
    public let account: String
    public let address: String

    /// The `n`th of the benchmarks' calls: account `acct:<n>`, address `10.0.<n / 256>.<n % 256>`.
    @inlinable
    public static func numbered(_ n: Int) -> ChainedCall {
        ChainedCall(account: "acct:\(n)", address: "10.0.\(n / 256).\(n % 256)")
    }

    @inlinable
    public init(account: String, address: String) {
        self.account = account
        self.address = address
    }
}

/// A plugin whose requests pass a chain of three limits — a GCRA per account, a GCRA per
/// client address, at most four in flight per account — and whose effect runs in place: what
/// GateBenchmarks' chain benchmark and `gate-profile chain` measure.
///
/// Its members are inlinable, so that the gate's code specialised for it in a benchmark calls
/// them as it would a plugin of the benchmark's own module.
public struct ChainedPlugin: GatePlugin {
    public let name = "chain"
    public let policy = GatePolicy.unrestricted
    public let limits: [LimitStage<ChainedCall>]

    /// The plugin with its three limits, or, when `withLimits` is `false`, with none: the same
    /// requests and effect without the chain, the floor under what the chain itself costs.
    @inlinable
    public init(withLimits: Bool = true) throws {
        // Rates no benchmark reaches: every request is admitted.
        let rate = try RateLimitOptions(count: 1_000_000_000, per: .seconds(1), burst: 1_000_000)
        limits = !withLimits ? [] : [
            try .rate("account", rate) { $0.account },
            try .rate("address", rate) { $0.address },
            try .concurrency("account-in-flight", limit: 4) { $0.account },
        ]
    }

    @inlinable
    public func key(for input: ChainedCall) -> String { input.account }

    @inlinable
    public func run(_ input: ChainedCall, context: EffectContext) async throws {}

    @inlinable
    public func runImmediately(_ input: ChainedCall, context: EffectContext) throws -> Void? { () }
}
