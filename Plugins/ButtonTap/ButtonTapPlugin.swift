import Sluice

/// Button taps: the first tap of a key in each window runs, the others in the window are
/// throttled (a leading-only throttle per key).
///
/// The input is the key (a user, a button); the output counts this key's taps that ran, kept in
/// the key's tally in its shard (bounded by the registration's `tallyBudget`).
public struct ButtonTapPlugin: GatePlugin {
    public let name = "tap"
    public let policy: GatePolicy
    /// Taps that ran, over all keys.
    public let taps = PluginCounter("taps")

    /// A plugin throttling each key to one tap per `window`. When its table is full of live keys
    /// it does what `whenFull` says: by default it forgets the keys it evicts (a lost tap is
    /// harmless, a refused one is not; see `WhenTableFull`).
    ///
    /// - Throws: `SluiceError` with code `invalidOption` when `window` is not positive.
    public init(window: Duration = ThrottleOptions.buttonTap.interval, whenFull: WhenTableFull = .forget) throws(SluiceError) {
        policy = .throttle(try ThrottleOptions(interval: window, leading: true, trailing: false, whenFull: whenFull))
    }

    public func key(for input: String) -> String { input }

    public func run(_ input: String, context: EffectContext) async throws -> Int {
        runTap(context)
    }

    /// A tap never suspends: the gate runs it in place, without a task.
    public func runImmediately(_ input: String, context: EffectContext) throws -> Int? {
        runTap(context)
    }

    private func runTap(_ context: EffectContext) -> Int {
        taps.increment()
        return context.incrementTally()
    }
}
