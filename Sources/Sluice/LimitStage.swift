import SluiceCore

/// A limit in a plugin's chain (``GatePlugin/limits``): a GCRA rate limit or a concurrency
/// limit over its own key, decided after the plugin's policy and before its effect runs.
///
/// ```swift
/// let limits: [LimitStage<PaymentPlugin.Payment>] = [
///     try .rate("account-rate", RateLimitOptions(count: 10, per: .seconds(1), burst: 4)) { $0.key },
///     try .concurrency("account-concurrency", limit: 4) { $0.key },
/// ]
/// ```
public struct LimitStage<Input: Sendable>: Sendable {
    /// The stage: its name, what it limits, and whether it runs in shadow mode.
    public let stage: ChainStage
    /// The key the stage's state is kept under for an input.
    public let key: @Sendable (Input) -> String

    /// A stage of `stage`, keyed by `key`.
    public init(_ stage: ChainStage, key: @escaping @Sendable (Input) -> String) {
        self.stage = stage
        self.key = key
    }

    /// A GCRA rate limit named `name`: a request spends its cost
    /// (``GatePlugin/cost(for:)``) per key; one that does not fit is
    /// ``GateOutcome/limited(_:)``. In shadow mode it counts what it would refuse and refuses
    /// nothing.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` for a name that is not 1–64
    ///   characters of `a–z 0–9 _ - .`.
    public static func rate(
        _ name: String, _ options: RateLimitOptions, shadow: Bool = false,
        key: @escaping @Sendable (Input) -> String
    ) throws(SluiceError) -> LimitStage {
        LimitStage(try ChainStage(name: name, limit: .rate(options), shadow: shadow), key: key)
    }

    /// At most `limit` executions per key in flight, named `name`: a slot is taken when the
    /// request is admitted and freed when its effect ends (before its reply is written).
    ///
    /// - Throws: `SluiceError` with code `invalidOption` for a bad name or a limit below 1.
    public static func concurrency(
        _ name: String, limit: Int, shadow: Bool = false, key: @escaping @Sendable (Input) -> String
    ) throws(SluiceError) -> LimitStage {
        LimitStage(try ChainStage(name: name, limit: .concurrency(limit), shadow: shadow), key: key)
    }
}
