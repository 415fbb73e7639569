/// The per-key state of a concurrency limit: how many executions of the key are in flight
/// (8 bytes). A key with none in flight is idle: the same as a fresh key.
public struct ConcurrencyState: Hashable, Sendable {
    /// Executions in flight.
    public var inFlight: Int

    /// A key with nothing in flight.
    @inlinable
    public init() {
        inFlight = 0
    }
}

extension ConcurrencyState: KeyedState {
    /// True when nothing of the key is in flight.
    @inlinable
    public func isIdle(at now: Instant) -> Bool { inFlight == 0 }
}

/// A concurrency limit for many keys (.NET's `ConcurrencyLimiter`, per key): at most `limit`
/// executions of a key in flight at once. A slot is taken when a request is admitted and given
/// back when its execution ends.
///
/// The table refuses a new key when it is full of keys with executions in flight
/// (``KeyTable/WhenFull/refuse``): evicting one would forget its slots and let more run than
/// the limit. Keys with nothing in flight are idle and go first.
public struct ConcurrencyLimitTable<Key: Hashable> {
    /// Executions in flight per key, at most.
    public let limit: Int
    /// The per-key states.
    public var table: KeyTable<Key, ConcurrencyState>

    /// An empty table within `budget`.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` when `limit` is below 1 or the budget holds
    ///   no key.
    public init(limit: Int, budget: MemoryBudget) throws(SluiceError) {
        guard limit >= 1 else {
            throw .invalidOption("A concurrency limit is at least 1.", value: limit)
        }
        self.limit = limit
        self.table = try KeyTable(budget: budget, whenFull: .refuse)
    }

    /// Takes a slot of `key` when one is free. Returns how many are in flight after it (the
    /// slot taken included) and whether it was taken.
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` when the table is full of keys in flight.
    @inlinable
    public mutating func acquire(key: Key, now: Instant) throws(SluiceError) -> (allowed: Bool, inFlight: Int) {
        try acquire(key: key, hash: KeySlotPrefetcher.hash(key), now: now)
    }

    /// ``acquire(key:now:)`` for a key already hashed (see ``KeySlotPrefetcher``).
    ///
    /// - Precondition: `hash == KeySlotPrefetcher.hash(key)`.
    @inlinable
    public mutating func acquire(key: Key, hash: UInt32, now: Instant) throws(SluiceError) -> (allowed: Bool, inFlight: Int) {
        let taken = try acquireEntry(key: key, hash: hash, now: now)
        return (taken.allowed, taken.inFlight)
    }

    /// ``acquire(key:hash:now:)``, also returning the key's entry: a hint for
    /// ``release(key:hint:)``.
    @inlinable
    public mutating func acquireEntry(
        key: Key, hash: UInt32, now: Instant
    ) throws(SluiceError) -> (allowed: Bool, inFlight: Int, entry: KeyTable<Key, ConcurrencyState>.Index) {
        let slot = try table.lookup(key, hash: hash, now: now, orInsert: ConcurrencyState())
        let inFlight = table[slot.index].inFlight
        guard inFlight < limit else { return (false, inFlight, slot.index) }
        table[slot.index].inFlight = inFlight + 1
        return (true, inFlight + 1, slot.index)
    }

    /// How many executions of `key` are in flight.
    @inlinable
    public func inFlight(key: Key) -> Int {
        table.index(of: key).map { table[$0].inFlight } ?? 0
    }

    /// Gives back a slot of `key` (its execution ended, or a later stage refused the request).
    @inlinable
    public mutating func release(key: Key) {
        release(key: key, hint: nil)
    }

    /// ``release(key:)``, looking for the key first at `hint`, when given: the entry
    /// ``acquireEntry(key:hash:now:)`` returned (see ``KeyTable/index(of:hint:)``).
    @inlinable
    public mutating func release(key: Key, hint: KeyTable<Key, ConcurrencyState>.Index?) {
        let found = if let hint { table.index(of: key, hint: hint) } else { table.index(of: key) }
        guard let index = found else { return }
        table[index].inFlight = Swift.max(0, table[index].inFlight - 1)
    }

    /// Drops idle keys (see ``KeyTable/sweep(now:maxEntries:)``).
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        table.sweep(now: now, maxEntries: maxEntries)
    }
}
