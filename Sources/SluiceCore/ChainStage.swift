/// What one stage of a ``LimitChain`` limits.
public enum StageLimit: Hashable, Sendable {
    /// A GCRA rate limit per key (see ``RateLimitState``): a request spends its cost.
    case rate(RateLimitOptions)
    /// At most this many executions per key in flight (see ``ConcurrencyLimitTable``): a request
    /// holds a slot until its execution ends.
    case concurrency(Int)
}

/// One stage of a ``LimitChain``: its name (what refusals and reports call it), what it limits,
/// and whether it runs in shadow mode.
public struct ChainStage: Hashable, Sendable {
    /// The stage's name: 1–64 characters of `a–z 0–9 _ - .` (it is a policy name on the wire).
    public let name: String
    /// What it limits.
    public let limit: StageLimit
    /// In shadow mode a stage decides, keeps its state and counts what it would have refused,
    /// and never refuses.
    public let shadow: Bool

    /// A stage named `name` limiting by `limit`.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` for a name that is not 1–64 characters of
    ///   `a–z 0–9 _ - .`, or a concurrency limit below 1.
    public init(name: String, limit: StageLimit, shadow: Bool = false) throws(SluiceError) {
        guard PolicyName.isValid(name) else {
            throw .invalidOption("A stage name is 1-64 characters of a-z 0-9 _ - .", value: name)
        }
        if case .concurrency(let slots) = limit, slots < 1 {
            throw .invalidOption("A concurrency limit is at least 1.", value: slots)
        }
        self.name = name
        self.limit = limit
        self.shadow = shadow
    }
}

/// What one stage of a chain decided for a request.
public enum StageVerdict: Hashable, Sendable {
    /// A rate stage's decision, with the fields redis-cell returns.
    case rate(RateLimitDecision)
    /// A concurrency stage's decision: its limit, how many of the key's executions are in
    /// flight (this one included when it was allowed), and whether it was allowed.
    case concurrency(limit: Int, inFlight: Int, allowed: Bool)

    /// Whether the stage let the request through.
    @inlinable
    public var allowed: Bool {
        switch self {
        case .rate(let decision): decision.allowed
        case .concurrency(_, _, let allowed): allowed
        }
    }
}
