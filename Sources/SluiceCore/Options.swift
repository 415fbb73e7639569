/// Options of a ``ThrottleState`` / ``Throttle``: at most one run per `interval`.
///
/// The initialiser validates; the stored properties can only be set through it.
public struct ThrottleOptions: Hashable, Sendable {
    /// Which held event a trailing run delivers.
    public enum TrailingDelivery: Hashable, Sendable {
        /// The most recent event of the window (lodash, Combine `latest: true`); earlier held events
        /// are superseded when a newer one arrives.
        case latest
        /// The first held event of the window (Combine `latest: false`); later ones are dropped.
        case first
    }

    /// The window length `I`.
    public let interval: Duration
    /// Run the first event of a window immediately.
    public let leading: Bool
    /// Run a held event when the window ends.
    public let trailing: Bool
    /// Which held event the trailing run delivers.
    public let delivers: TrailingDelivery
    /// What a table of these throttles does when it is full of live keys (``WhenTableFull/forget``
    /// unless set: the button-tap throttle's safe side).
    public var whenFull: WhenTableFull

    @usableFromInline
    let intervalNanos: Int64

    /// Creates validated options.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` if `interval <= 0` or neither `leading` nor
    ///   `trailing` is set.
    public init(
        interval: Duration,
        leading: Bool = true,
        trailing: Bool = false,
        delivers: TrailingDelivery = .latest,
        whenFull: WhenTableFull = .forget
    ) throws(SluiceError) {
        guard interval > .zero else {
            throw .invalidOption("A throttle interval must be greater than zero.", value: interval)
        }
        guard leading || trailing else {
            throw .invalidOption("A throttle needs leading, trailing or both.", value: "leading: false, trailing: false")
        }
        self.interval = interval
        self.leading = leading
        self.trailing = trailing
        self.delivers = delivers
        self.whenFull = whenFull
        self.intervalNanos = interval.nanosecondsClamped
    }
}

/// Options of a ``DebounceState`` / ``Debounce``: run once the key has been quiet for `quiet`.
public struct DebounceOptions: Hashable, Sendable {
    /// The quiet period `Q`.
    public let quiet: Duration
    /// The longest a burst can hold an event back: a held event runs no later than `maxWait` after
    /// the burst's first event (or after the burst's last run).
    public let maxWait: Duration?
    /// Run the first event of a burst immediately.
    public let leading: Bool
    /// Run the latest held event when the burst goes quiet (or `maxWait` passes).
    public let trailing: Bool

    @usableFromInline let quietNanos: Int64
    @usableFromInline let maxWaitNanos: Int64  // Int64.max when there is none

    /// Creates validated options.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` if `quiet <= 0`, `maxWait < quiet`, or neither
    ///   `leading` nor `trailing` is set.
    public init(
        quiet: Duration,
        maxWait: Duration? = nil,
        leading: Bool = false,
        trailing: Bool = true
    ) throws(SluiceError) {
        guard quiet > .zero else {
            throw .invalidOption("A debounce quiet period must be greater than zero.", value: quiet)
        }
        if let maxWait, maxWait < quiet {
            throw .invalidOption("A debounce maxWait must be at least the quiet period.", value: maxWait)
        }
        guard leading || trailing else {
            throw .invalidOption("A debounce needs leading, trailing or both.", value: "leading: false, trailing: false")
        }
        self.quiet = quiet
        self.maxWait = maxWait
        self.leading = leading
        self.trailing = trailing
        self.quietNanos = quiet.nanosecondsClamped
        self.maxWaitNanos = maxWait?.nanosecondsClamped ?? .max
    }
}

/// Options of a ``RateLimitState`` / ``RateLimit`` (GCRA, as redis-cell's `CL.THROTTLE`):
/// `count` per `period`, with `burst` extra events allowed at once.
public struct RateLimitOptions: Hashable, Sendable {
    /// Events allowed per `period` at the sustained rate.
    public let count: Int
    /// The period `count` is measured over.
    public let period: Duration
    /// Extra events allowed back to back (redis-cell's `max_burst`); `limit` is `burst + 1`.
    public let burst: Int
    /// What a table of these limits does when it is full of live keys (``WhenTableFull/remember``
    /// unless set: a quota does not reset under a flood of new keys).
    public var whenFull: WhenTableFull

    /// Time between events at the sustained rate (`period / count`, in nanoseconds).
    @usableFromInline let emissionInterval: Int64
    /// How far ahead of schedule a key may run (`emissionInterval * (burst + 1)`).
    @usableFromInline let tolerance: Int64

    /// Creates validated options.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` if `count < 1`, `period <= 0`, `burst < 0`,
    ///   `period / count` is below one nanosecond, or the burst window
    ///   (`period / count × (burst + 1)`) is longer than about 73 years.
    public init(count: Int, per period: Duration, burst: Int, whenFull: WhenTableFull = .remember) throws(SluiceError) {
        guard count >= 1 else {
            throw .invalidOption("A rate limit count must be at least 1.", value: count)
        }
        guard period > .zero else {
            throw .invalidOption("A rate limit period must be greater than zero.", value: period)
        }
        guard burst >= 0 else {
            throw .invalidOption("A rate limit burst must be at least 0.", value: burst)
        }
        let interval = period.nanosecondsClamped / Int64(count)
        guard interval >= 1 else {
            throw .invalidOption("A rate limit's period / count must be at least 1 ns.", value: "\(count) per \(period)")
        }
        let (limit, limitOverflow) = Int64(burst).addingReportingOverflow(1)
        let (tolerance, overflow) = interval.multipliedReportingOverflow(by: limit)
        // A key's arrival time runs at most `tolerance + interval` ahead of now; keeping that
        // under a quarter of Int64's range (about 73 years) keeps every sum in `check` exact,
        // where a saturated sum would stop the arrival time advancing and admit everything.
        guard !limitOverflow, !overflow, tolerance <= Self.maximumWindowNanos - interval else {
            throw .invalidOption("A rate limit's burst window (period / count × (burst + 1)) must be at most 73 years.", value: "\(count) per \(period), burst \(burst)")
        }
        self.count = count
        self.period = period
        self.burst = burst
        self.whenFull = whenFull
        self.emissionInterval = interval
        self.tolerance = tolerance
    }

    /// The longest burst window (`tolerance + interval`) options may set, in nanoseconds.
    static let maximumWindowNanos = Int64.max >> 2

    /// redis-cell's `limit` field: `burst + 1`.
    public var limit: Int { burst + 1 }
}

/// Options of an ``IdempotencyTable``: exactly-once execution per record key.
public struct IdempotencyOptions: Hashable, Sendable {
    /// What a second request with the same key and fingerprint gets while the first still runs.
    public enum Concurrent: Hashable, Sendable {
        /// Wait for the running execution and share its result.
        case join
        /// Refuse at once (HTTP 409 Conflict).
        case reject
    }

    /// How long a completed record is kept (and replayed) after completion, `T`.
    public let retention: Duration
    /// How long an execution owns its record before another request may take it over, `L`.
    public let lease: Duration
    /// Join or reject a concurrent duplicate.
    public let concurrent: Concurrent
    /// Store failed results and replay them (true), or release the record on failure (false).
    public let cacheErrors: Bool
    /// New records one key (an account) may open: this many back to back, and this many more
    /// per `retention` (a GCRA per key), so that one key's flood of new records is refused
    /// (`busy`) without filling the table for every other key. Replays and joins open no
    /// record and are never refused by it; a record released because errors are not cached
    /// gives its unit back. `nil` sets no quota.
    public let recordsPerKey: Int?

    @usableFromInline let retentionNanos: Int64
    @usableFromInline let leaseNanos: Int64

    /// Creates validated options.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` if `retention <= 0` or `lease <= 0`.
    public init(
        retention: Duration,
        lease: Duration,
        concurrent: Concurrent = .join,
        cacheErrors: Bool = true,
        recordsPerKey: Int? = nil
    ) throws(SluiceError) {
        if let recordsPerKey, recordsPerKey < 1 {
            throw .invalidOption("A quota of idempotency records per key must be at least 1.", value: recordsPerKey)
        }
        self.recordsPerKey = recordsPerKey
        guard retention > .zero else {
            throw .invalidOption("An idempotency retention must be greater than zero.", value: retention)
        }
        guard lease > .zero else {
            throw .invalidOption("An idempotency lease must be greater than zero.", value: lease)
        }
        self.retention = retention
        self.lease = lease
        self.concurrent = concurrent
        self.cacheErrors = cacheErrors
        self.retentionNanos = retention.nanosecondsClamped
        self.leaseNanos = lease.nanosecondsClamped
    }
}
