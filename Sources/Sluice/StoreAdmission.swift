import SluiceCore

/// What one ``StoreStage`` decided about a request.
public enum StoreVerdict: Sendable, Hashable {
    /// A throttle stage: `wait` until the key may run again (`nil`: it runs), and the instant
    /// (in the store's clock) its window opened at, which giving it back compares.
    case throttle(wait: Duration?, windowStart: Int64)
    /// A rate or concurrency stage, as a local chain reports it.
    case stage(StageVerdict)

    /// Whether the stage let the request through.
    public var allowed: Bool {
        switch self {
        case .throttle(let wait, _): wait == nil
        case .stage(let verdict): verdict.allowed
        }
    }
}

/// What a shared store decided about a request's stages, all or nothing, as a local chain's
/// `ChainAdmission` says it.
public struct StoreAdmission: Sendable, Hashable {
    /// Admitted, or which stage refused (its index among the stages asked).
    public var result: ChainAdmission.Result
    /// Each stage's verdict, in order, up to the one that refused (included).
    public var verdicts: [StoreVerdict]
    /// Stages in shadow mode that would have refused.
    public var shadowRefusals: [Int]
    /// The stages whose part the request holds when admitted (nothing otherwise).
    public var hold: ChainHold

    /// An admission of `result`.
    public init(
        result: ChainAdmission.Result, verdicts: [StoreVerdict], shadowRefusals: [Int] = [], hold: ChainHold = ChainHold()
    ) {
        self.result = result
        self.verdicts = verdicts
        self.shadowRefusals = shadowRefusals
        self.hold = hold
    }

    /// The window start the throttle stage `index` opened for this request, when it did (what
    /// giving it back compares).
    public func windowStart(of index: Int) -> Int64? {
        guard hold.contains(index), index < verdicts.count, case .throttle(nil, let start) = verdicts[index] else {
            return nil
        }
        return start
    }
}
