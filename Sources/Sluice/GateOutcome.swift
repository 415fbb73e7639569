import SluiceCore

/// What became of one request: everything a front needs to answer it.
///
/// Fronts turn outcomes into bytes (a reply line, an HTTP status with header fields and a body);
/// the gate itself never renders text.
public enum GateOutcome<Output: Sendable>: Sendable {
    /// The effect ran and returned `output` — executed for this request, replayed from an
    /// idempotency record, or shared with the request that led it (``RunInfo/source``).
    case ran(Output, RunInfo)
    /// The effect threw `error` (the error itself, typed as the effect threw it). For idempotent
    /// plugins that cache errors, a replay gives the stored error back.
    case failed(any Error, RunInfo)
    /// A throttle or debounce dropped the request; the key can be tried again after `retryAfter`.
    case throttled(retryAfter: Duration)
    /// A rate or concurrency limit refused the request: the plugin's own
    /// ``GatePolicy/rateLimit(_:)``, or a stage of its ``GatePlugin/limits`` (named in
    /// ``LimitRefusal/stage``). Nothing ran, and the stages before the refusing one gave back
    /// what this request took.
    case limited(LimitRefusal)
    /// A newer request for the key replaced this one before it ran.
    case superseded
    /// The request was cancelled before it produced a result.
    case cancelled(CancellationReason)
    /// The idempotency record was used with another payload (HTTP 422).
    case mismatch
    /// The same idempotent request is running and the plugin refuses concurrent duplicates
    /// (HTTP 409).
    case conflict
    /// A table or budget that refuses rather than evicts is full: nothing ran.
    case busy
    /// The gate is shutting down and takes no new requests.
    case shuttingDown
    /// The plugin's shared store did not answer and its ``StoreFailureMode`` refuses rather than
    /// guesses: nothing ran (HTTP 503). An idempotent request is never let through without its
    /// record.
    case unavailable
}

extension GateOutcome {
    /// The output, when the effect ran (executed, replayed or joined).
    public var output: Output? {
        if case .ran(let output, _) = self { return output }
        return nil
    }

    /// How the request got its result, when it has one (``ran(_:_:)`` or ``failed(_:_:)``).
    public var runInfo: RunInfo? {
        switch self {
        case .ran(_, let info), .failed(_, let info): info
        default: nil
        }
    }

    /// This outcome marked as decided by this process alone (``RunInfo/Guarantee/local``).
    public var decidedLocally: GateOutcome {
        switch self {
        case .ran(let output, var info):
            info.guarantee = .local
            return .ran(output, info)
        case .failed(let error, var info):
            info.guarantee = .local
            return .failed(error, info)
        default:
            return self
        }
    }
}

extension GateOutcome {
    /// This outcome marked as given while the store's data may have been lost lately
    /// (``RunInfo/Guarantee/storeDataLost``), unless it says already that this process decided
    /// alone.
    var markedStoreDataLost: GateOutcome {
        switch self {
        case .ran(let output, var info) where info.guarantee == .store:
            info.guarantee = .storeDataLost
            return .ran(output, info)
        case .failed(let error, var info) where info.guarantee == .store:
            info.guarantee = .storeDataLost
            return .failed(error, info)
        default:
            return self
        }
    }
}

/// How a request that got a result got it.
public struct RunInfo: Sendable, Hashable {
    /// Where the result came from.
    public enum Source: Sendable, Hashable {
        /// This request's own execution.
        case executed
        /// An idempotency record stored by an earlier execution.
        case replayed
        /// An execution another request led, which this one joined while it ran (idempotent
        /// duplicates, single-flight waiters).
        case joined
    }

    /// How far the decision holds: across every instance sharing the plugin's store, or only
    /// in this process.
    public enum Guarantee: Sendable, Hashable {
        /// The plugin's store decided (its own memory, or the shared store it was given).
        case store
        /// The shared store did not answer and this process decided alone
        /// (``StoreFailureMode/local``): another instance may decide otherwise.
        case local
        /// The shared store lost its data less than a retention ago (it came back empty: its
        /// epoch changed). The store decided, but a request completed before the loss may run
        /// again when retried, unless the effect's downstream keeps its changes by record
        /// (``EffectRecord``). Fronts say so (`Sluice-Guarantee: store-data-lost`).
        case storeDataLost
    }

    /// Where the result came from.
    public var source: Source
    /// For rate-limited plugins, the limiter's state after this request.
    public var rateLimit: RateLimitDecision?
    /// The rate stages of the plugin's ``GatePlugin/limits``, each one's state after this
    /// request (empty for a plugin without rate stages, and for replays and joins, which spend
    /// nothing).
    public var limits: [RateStageReport] {
        get { limitReports.reports }
        set { limitReports = LimitReports(newValue) }
    }
    /// What ``limits`` is built from when read.
    @usableFromInline var limitReports = LimitReports.none
    /// Whether the store decided, or this process alone while its shared store was unavailable.
    public var guarantee: Guarantee

    /// Creates run information.
    @inlinable
    public init(source: Source, rateLimit: RateLimitDecision? = nil, guarantee: Guarantee = .store) {
        self.source = source
        self.rateLimit = rateLimit
        self.guarantee = guarantee
    }

    // Made where they are used rather than copied from a global: a copy of a stored
    // `RunInfo` goes through its value witness (it holds an array), a fresh one does not.

    /// This request's own execution, no rate limit.
    @inlinable public static var executed: RunInfo { RunInfo(source: .executed) }
    /// A replay of a stored result.
    @inlinable public static var replayed: RunInfo { RunInfo(source: .replayed) }
    /// A result shared with the request that led the execution.
    @inlinable public static var joined: RunInfo { RunInfo(source: .joined) }

    // Equal and hashed by what it says: the reports as read, however they are kept.

    public static func == (lhs: RunInfo, rhs: RunInfo) -> Bool {
        lhs.source == rhs.source && lhs.rateLimit == rhs.rateLimit && lhs.guarantee == rhs.guarantee
            && lhs.limits == rhs.limits
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(source)
        hasher.combine(rateLimit)
        hasher.combine(limits)
        hasher.combine(guarantee)
    }
}

/// Why a request was cancelled.
public enum CancellationReason: Sendable, Hashable {
    /// `cancel(id:…)` named it (by scope or by key).
    case requested
    /// A newer request for the key replaced its running effect (switch-latest).
    case replaced
    /// Its scope closed (its connection or session ended).
    case scopeClosed
    /// The task awaiting it was cancelled.
    case callerCancelled
    /// The gate shut down before it finished.
    case shutdown
    /// Its key's state was evicted from a full table while it waited, so it can never run.
    case evicted
    /// The effect threw `CancellationError` although nothing cancelled it.
    case byEffect
}
