/// Options of a policy whose per-key table may remember the live keys it evicts.
public protocol KeyedTableOptions {
    /// What the table does when it is full of live keys.
    var whenFull: WhenTableFull { get }
    /// The longest a key's state restricts it past the instant of its last event: how far ahead
    /// a remembered restriction may end.
    var restrictionHorizon: Duration { get }
}

extension ThrottleOptions: KeyedTableOptions {
    /// One interval: a window ends at most that long after the event that opened it.
    @inlinable
    public var restrictionHorizon: Duration { interval }
}

extension DebounceOptions: KeyedTableOptions {
    /// A debounce delays events rather than refusing them: its table forgets.
    @inlinable
    public var whenFull: WhenTableFull { .forget }

    /// The quiet period (unused: a debounce table forgets).
    @inlinable
    public var restrictionHorizon: Duration { quiet }
}

extension RateLimitOptions: KeyedTableOptions {
    /// The burst window plus one emission interval: a key's theoretical arrival time runs at
    /// most that far ahead of now.
    @inlinable
    public var restrictionHorizon: Duration { .nanoseconds(tolerance.saturatingAdd(emissionInterval)) }
}

/// What a throttle or rate-limit table keeps of the live keys it evicts (``WhenTableFull/remember``):
/// a ``RestrictionFilter`` of their restrictions, and counters for metrics. A table that forgets
/// or refuses has a summary that remembers nothing.
public struct EvictionSummary: Sendable {
    /// The filter (empty, remembering nothing, unless the table remembers).
    public private(set) var filter: RestrictionFilter
    /// Keys not in the table whose state the summary restored.
    public private(set) var restored = 0
    /// Decisions refused for a key whose state the summary restored, or that it could not decide
    /// (busy: only an overflow marker answered). Some may be wrong: a never-seen key the filter
    /// mistakes for a remembered one (a few in a million), a key whose restriction the filter
    /// rounds up by up to ``RestrictionFilter/resolution``, or a never-seen key that maps to a
    /// marked bucket.
    public private(set) var refusals = 0
    /// When the filter was last purged.
    var lastPurge: Instant?
    /// The latest instant the table was called with: its clock never goes back (see
    /// ``monotonic(_:)``).
    public var latestNow = Instant(nanoseconds: .min)

    /// A summary that remembers nothing.
    public init() {
        filter = RestrictionFilter()
    }

    /// The summary a table with `options` keeps within `bytes`: nothing unless the options
    /// remember.
    public init<Options: KeyedTableOptions>(options: Options, bytes: Int) throws(SluiceError) {
        filter = options.whenFull == .remember
            ? try RestrictionFilter(bytes: bytes, horizon: Swift.max(options.restrictionHorizon, .nanoseconds(1)))
            : RestrictionFilter()
    }

    /// `now`, or the latest instant seen if that is later. A table shared by loops (a plugin's
    /// limit chain) is called with each loop's clock, and one loop may read its clock a little
    /// before another; the table decides on one clock that never goes back, so the filter
    /// (which requires one) never drops a restriction that ends between the two readings.
    @inlinable
    public mutating func monotonic(_ now: Instant) -> Instant {
        // Stored only when it moves: a summary read on every decision writes nothing otherwise.
        if now > latestNow { latestNow = now }
        return latestNow
    }

    /// What ``monotonic(_:)`` returns for `now`, without recording it (for a read that changes
    /// nothing).
    @inlinable
    public func clamped(_ now: Instant) -> Instant {
        Swift.max(now, latestNow)
    }

    /// Whether the summary remembers evicted keys.
    @inlinable
    public var isRemembering: Bool { filter.bucketCount > 0 }

    /// The 64-bit hash the filter is given for `key`.
    @inlinable
    static func hash<Key: Hashable>(_ key: Key) -> UInt64 {
        UInt64(bitPattern: Int64(key.hashValue))
    }

    /// Remembers the restrictions of the live keys a table evicted.
    public mutating func remember<Key: Hashable, State: RestrictingState>(_ evicted: [(key: Key, value: State)], now: Instant) {
        guard isRemembering else { return }
        for (key, state) in evicted {
            if let until = state.restriction(at: now) {
                filter.remember(hash: Self.hash(key), until: until, now: now)
            }
        }
    }

    /// The state the summary gives a key that the table does not hold, one at least as strict as
    /// its remembered restriction, or `nil` when it remembers none; for a key only an overflow
    /// marker answers for (which a decision refuses as busy, see ``recall(_:now:)``), a state
    /// restricted as long as the marker. Counts nothing: what a peek reports.
    public func restoredState<Key: Hashable, State: RestrictingState>(of key: Key, now: Instant) -> State? {
        guard isRemembering,
            let until = filter.restrictedUntil(hash: Self.hash(key), now: clamped(now))
        else { return nil }
        return State(restrictedUntil: until)
    }

    /// What the summary says about a key the table did not hold.
    public enum Recall<State> {
        /// It remembers nothing for the key: a fresh state decides it.
        case nothing
        /// It remembers a restriction for the key: this state, at least as strict, decides it.
        case restricted(State)
        /// Only an overflow marker answers (see ``RestrictionFilter/overflows``): the summary
        /// cannot tell this key from the others that map to the marked bucket until `until`, so
        /// it can neither let it through nor say it is limited. The table refuses it as busy.
        case undecidable(until: Instant)
    }

    /// What the summary says about `key` for a decision, counted: a remembered restriction is
    /// restored (``restored``), and an answer given by an overflow marker alone is
    /// ``Recall/undecidable(until:)`` and counted as a refusal, not a restriction of the key.
    ///
    /// Inlinable, so that a table asks it in code specialised for its key and state: called as
    /// generic code, every new key of a table paid for looking the generic types up, about a
    /// fifth of a decision for a key never seen (gate-profile flood-decision).
    @inlinable
    public mutating func recall<Key: Hashable, State: RestrictingState>(_ key: Key, now: Instant) -> Recall<State> {
        guard isRemembering else { return .nothing }
        switch recall(hash: Self.hash(key), now: now) {
        case .nothing: return .nothing
        case .restricted(let until): return .restricted(State(restrictedUntil: until))
        case .undecidable(let until): return .undecidable(until: until)
        }
    }

    /// ``recall(_:now:)`` for a key's hash: the instant a remembered restriction lasts until.
    @usableFromInline
    mutating func recall(hash: UInt64, now: Instant) -> Recall<Instant> {
        guard let found = filter.lookup(hash: hash, now: now) else { return .nothing }
        if found.byMarkerOnly {
            refusals &+= 1
            return .undecidable(until: found.until)
        }
        restored &+= 1
        return .restricted(found.until)
    }

    /// Counts a decision refused for a key whose state the summary restored.
    public mutating func countRefusal() {
        refusals &+= 1
    }

    /// Clears expired entries, at a pace of one pass over the filter per two horizons (the
    /// filter needs one per four; see ``RestrictionFilter``).
    public mutating func purge(now: Instant) {
        guard isRemembering else { return }
        let elapsed = lastPurge.map { now.nanoseconds &- $0.nanoseconds } ?? 0
        lastPurge = now
        let horizon = Swift.max(1, filter.horizon.nanosecondsClamped)
        let share = Double(Swift.max(0, elapsed)) / Double(horizon) / 2
        let buckets = share >= 1 ? filter.bucketCount : Int(share * Double(filter.bucketCount)) + 1
        filter.purge(now: now, maxBuckets: buckets)
    }

    /// Adds the summary's counters to a table's.
    public func adding(to stats: KeyTableStats) -> KeyTableStats {
        var stats = stats
        stats.summaryRestored = restored
        stats.summaryRefusals = refusals
        stats.summaryFill = filter.fill
        stats.summaryOverflows = filter.overflows
        return stats
    }
}

extension MemoryBudget {
    /// The share of a remembering table's budget its summary takes: seven eighths (see
    /// ``WhenTableFull/remember``).
    @inlinable
    public func split(remembering: Bool) -> (table: MemoryBudget, summaryBytes: Int) {
        guard remembering else { return (self, 0) }
        if let bytes {
            let summary = bytes / 8 * 7
            return (MemoryBudget(entries: entries, bytes: bytes - summary, extraBytesPerKey: extraBytesPerKey), summary)
        }
        // An entry budget: the table keeps its entries, and the summary remembers 64 keys
        // (256 bytes) for each.
        let entries = entries ?? 1
        let (summary, overflow) = entries.multipliedReportingOverflow(by: 256)
        return (self, overflow ? Int.max : Swift.max(16, summary))
    }
}
