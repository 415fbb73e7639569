/// Per-key state a ``KeyTable`` can hold and expire.
public protocol KeyedState {
    /// True when the state no longer matters at `now`: dropping it (or replacing it with a fresh
    /// state) changes no later decision. Tables drop idle state lazily on access and in ``KeyTable/sweep(now:maxEntries:)``.
    func isIdle(at now: Instant) -> Bool
}

/// How much memory a ``KeyTable`` may use, in entries and/or bytes.
///
/// A byte budget bounds what the table really holds: its index, its entries, the heap bytes of
/// its keys (a `String` longer than 15 UTF-8 bytes lives on the heap) and the bytes the runtime
/// charges to it for the key's side state (held requests, timers, waiting callers; see
/// ``KeyTable/charge(bytes:now:)``). It also fixes the entry capacity (the most entries that fit when
/// every key is stored inline); when both limits are given the smaller capacity wins.
public struct MemoryBudget: Hashable, Sendable {
    /// At most this many keys.
    public var entries: Int?
    /// At most this many bytes of table storage.
    public var bytes: Int?
    /// Further bytes to count per key beyond what the table measures itself (the table already
    /// counts each key's heap bytes). Counted against `bytes`.
    public var extraBytesPerKey: Int

    /// A budget of `entries` keys.
    public static func entries(_ entries: Int) -> MemoryBudget {
        MemoryBudget(entries: entries, bytes: nil, extraBytesPerKey: 0)
    }

    /// A budget of `bytes` bytes; `extraBytesPerKey` counts heap storage owned by each key.
    public static func bytes(_ bytes: Int, extraBytesPerKey: Int = 0) -> MemoryBudget {
        MemoryBudget(entries: nil, bytes: bytes, extraBytesPerKey: extraBytesPerKey)
    }

    /// A budget with both limits.
    public init(entries: Int?, bytes: Int?, extraBytesPerKey: Int = 0) {
        self.entries = entries
        self.bytes = bytes
        self.extraBytesPerKey = extraBytesPerKey
    }
}

/// Counters a ``KeyTable`` keeps (for metrics).
public struct KeyTableStats: Hashable, Sendable {
    /// Keys inserted.
    public var inserted: Int = 0
    /// Live keys evicted to make room (least recently used first).
    public var evicted: Int = 0
    /// Idle keys dropped or reset (lazily, by a sweep, or to make room).
    public var expired: Int = 0
    /// Inserts refused because the table was full of live keys.
    public var refused: Int = 0
    /// Side-state charges refused because the budget was spent (see ``KeyTable/charge(bytes:now:)``).
    public var refusedCharges: Int = 0

    public init() {}
}

/// A hash table from full keys to small per-key states, with a fixed capacity, an intrusive
/// least-recently-used list and lazy plus incremental expiry.
///
/// Layout (all indices `Int32`): each entry — its key, its value, a 32-bit hash and its LRU links
/// (`prev`, `next`) — lives in one dense array reserved at full capacity up front (pages are only
/// touched as entries are added), so that finding and touching a key reads one entry's bytes
/// together rather than one cache line in each of several arrays; an open-addressing index of
/// `Int32` slots with linear probing is allocated at full size up front (a power of two, at least
/// twice the capacity), so it is at most half full and the table never rehashes — no pause on the
/// loop thread, no freed old index left behind in the heap. Removal moves the last entry into the
/// hole, so the array stays dense. Per entry this costs
/// `stride(Entry) + 8…16 (index slots)` bytes, where an entry is the key, the value, 4 bytes of
/// hash and 8 of links, laid out with the alignment's padding: 56 to 64 bytes for `String` keys
/// of ≤ 15 UTF-8 bytes and a ``ThrottleState`` (an entry of 48). Keys are compared in full; the
/// hash only chooses the slot.
///
/// When the table is full, inserting a key first drops the least recently used entry if it is idle;
/// otherwise it evicts it (``WhenFull/evictLeastRecentlyUsed``, for throttle and rate tables) or, after
/// a short sweep for idle entries, refuses with ``SluiceError/Code/tableBusy`` (``WhenFull/refuse``,
/// for idempotency tables).
///
/// An ``Index`` stays valid until the next call that inserts or removes an entry.
public struct KeyTable<Key: Hashable, Value: KeyedState> {
    /// What to do when a new key arrives and the table is full of live keys.
    public enum WhenFull: Hashable, Sendable {
        /// Evict the least recently used key.
        case evictLeastRecentlyUsed
        /// Refuse the new key (throw ``SluiceError/Code/tableBusy``).
        case refuse
    }

    /// The position of an entry.
    public struct Index: Hashable, Sendable {
        @usableFromInline var raw: Int32
        @inlinable init(_ raw: Int32) { self.raw = raw }
    }

    /// The result of an insertion.
    public struct Insertion {
        /// Where the new entry lives.
        public var index: Index
        /// Live entries evicted to make room, least recently used first (usually none, at most
        /// one unless the new key is long and the byte budget is spent).
        public var evicted: [(key: Key, value: Value)]

        @inlinable init(index: Index, evicted: [(key: Key, value: Value)]) {
            self.index = index
            self.evicted = evicted
        }
    }

    /// One key with its state, its hash and its links in the recency list.
    @usableFromInline struct Entry {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var hash: UInt32
        /// The next more recently used entry, or -1.
        @usableFromInline var prev: Int32
        /// The next less recently used entry, or -1.
        @usableFromInline var next: Int32

        @inlinable init(key: Key, value: Value, hash: UInt32) {
            self.key = key
            self.value = value
            self.hash = hash
            self.prev = -1
            self.next = -1
        }
    }

    @usableFromInline var entries: ContiguousArray<Entry>
    @usableFromInline var slots: ContiguousArray<Int32>
    @usableFromInline var mask: Int
    /// Most recently used entry, or -1.
    @usableFromInline var head: Int32
    /// Least recently used entry, or -1.
    @usableFromInline var tail: Int32
    @usableFromInline var sweepCursor: Int
    /// `counters.inserted` when ``sweepKeepingUp(now:minimumEntries:)`` last ran.
    @usableFromInline var insertedAtLastSweep = 0
    /// ``Counters/expired`` at the last sweep.
    @usableFromInline var expiredAtLastSweep = 0

    /// The most entries the table holds.
    public let capacity: Int
    /// What happens when it is full.
    public let whenFull: WhenFull
    @usableFromInline var counters = KeyTableStats()
    /// The byte budget, if the table has one.
    public let byteLimit: Int?
    /// Bytes each entry costs in the table's arrays (key, value, hash, links, extra).
    @usableFromInline let entryBytes: Int
    /// Bytes of the index, allocated (and touched) when the table is created.
    @usableFromInline let indexByteCount: Int
    /// Heap bytes of the keys held.
    @usableFromInline var keyHeapBytes = 0
    /// Bytes the runtime charged for side state.
    @usableFromInline var chargedBytes = 0
    /// Side-state charges held (bounded by ``capacity`` when the budget has no byte limit).
    @usableFromInline var chargeCount = 0

    /// The bytes the table holds now: the index, its entries, its keys' heap bytes and the side
    /// state charged to it.
    public var bytesUsed: Int {
        indexByteCount + entries.count * entryBytes + keyHeapBytes + chargedBytes
    }

    /// The heap bytes `key` owns outside the table (0 for keys stored inline).
    @inlinable
    public static func heapBytes(of key: Key) -> Int {
        if let string = key as? String { return string.heapByteEstimate }
        return 0
    }

    /// Counters.
    public var stats: KeyTableStats { counters }

    /// The most entries a table may have: 2²⁸ (its index alone is then 2 GiB).
    public static var maximumCapacity: Int { 1 << 28 }

    /// Estimated bytes per entry at full capacity with the smallest index (twice the capacity);
    /// see the type's documentation.
    public static var estimatedBytesPerEntry: Int {
        MemoryLayout<Entry>.stride + 8
    }

    /// Estimated bytes of a table of `capacity` entries once full: the entries plus the index (which
    /// is allocated, and touched, when the table is created). Heap storage owned by keys (long
    /// strings) is not included.
    public static func estimatedBytes(capacity: Int) -> Int {
        capacity * MemoryLayout<Entry>.stride + indexBytes(capacity: capacity)
    }

    /// The largest capacity whose estimated bytes (entries at full capacity plus the index) fit the
    /// budget.
    public static func capacity(for budget: MemoryBudget) -> Int {
        var capacity = Swift.min(budget.entries ?? maximumCapacity, maximumCapacity)
        if let bytes = budget.bytes {
            let perEntry = MemoryLayout<Entry>.stride + budget.extraBytesPerKey
            // Largest c with c × perEntry + peak index bytes ≤ bytes.
            var low = 0
            var high = Swift.min(capacity, bytes / Swift.max(1, perEntry))
            while low < high {
                let mid = (low + high + 1) / 2
                if mid * perEntry + indexBytes(capacity: mid) <= bytes {
                    low = mid
                } else {
                    high = mid - 1
                }
            }
            capacity = Swift.min(capacity, low)
        }
        return capacity
    }

    /// Slots needed to keep `count` entries at most half full.
    @usableFromInline
    static func slotCount(for count: Int) -> Int {
        var slots = 16
        while slots < count * 2 { slots *= 2 }
        return slots
    }

    static func indexBytes(capacity: Int) -> Int {
        slotCount(for: capacity) * MemoryLayout<Int32>.stride
    }

    /// A table for at most `capacity` keys.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` if `capacity < 1` or above ``maximumCapacity``.
    public init(capacity: Int, whenFull: WhenFull) throws(SluiceError) {
        try self.init(capacity: capacity, whenFull: whenFull, byteLimit: nil, extraBytesPerKey: 0)
    }

    init(capacity: Int, whenFull: WhenFull, byteLimit: Int?, extraBytesPerKey: Int) throws(SluiceError) {
        guard capacity >= 1, capacity <= Self.maximumCapacity else {
            throw .invalidOption("A key table needs a capacity from 1 to \(Self.maximumCapacity) entries.", value: "capacity \(capacity)")
        }
        self.capacity = capacity
        self.whenFull = whenFull
        self.byteLimit = byteLimit
        self.entryBytes = MemoryLayout<Entry>.stride + extraBytesPerKey
        self.indexByteCount = Self.indexBytes(capacity: capacity)
        entries = []
        entries.reserveCapacity(capacity)
        let slotCount = Self.slotCount(for: capacity)
        slots = ContiguousArray(repeating: -1, count: slotCount)
        mask = slotCount - 1
        head = -1
        tail = -1
        sweepCursor = 0
    }

    /// A table sized by a memory budget.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` if the budget sets neither entries nor bytes, or
    ///   allows no entry.
    public init(budget: MemoryBudget, whenFull: WhenFull) throws(SluiceError) {
        guard budget.entries != nil || budget.bytes != nil else {
            throw .invalidOption("A memory budget needs a number of entries, of bytes, or both.", value: budget)
        }
        let capacity = Self.capacity(for: budget)
        guard capacity >= 1 else {
            throw .invalidOption("The memory budget is too small for a single key.", value: budget)
        }
        try self.init(capacity: capacity, whenFull: whenFull, byteLimit: budget.bytes, extraBytesPerKey: budget.extraBytesPerKey)
    }

    /// The number of keys held (idle ones included until they are dropped).
    @inlinable
    public var count: Int { entries.count }

    /// Whether the table holds no key.
    @inlinable
    public var isEmpty: Bool { entries.isEmpty }

    @inlinable
    static func hash(_ key: Key) -> UInt32 {
        UInt32(truncatingIfNeeded: key.hashValue)
    }

    /// Slot position of `key` (entry ≥ 0) or of the empty slot where it would go (entry == -1).
    @inlinable
    func probe(_ key: Key, hash: UInt32) -> (position: Int, entry: Int32) {
        slots.withUnsafeBufferPointer { slots in
            entries.withUnsafeBufferPointer { entries in
                var position = Int(hash) & mask
                while true {
                    let entry = slots[position]
                    if entry < 0 { return (position, -1) }
                    if entries[Int(entry)].hash == hash && entries[Int(entry)].key == key { return (position, entry) }
                    position = (position &+ 1) & mask
                }
            }
        }
    }

    /// The entry for `key`, without touching its recency or expiring it.
    @inlinable
    public func index(of key: Key) -> Index? {
        let found = probe(key, hash: Self.hash(key)).entry
        return found >= 0 ? Index(found) : nil
    }

    /// The state at `index`.
    @inlinable
    public subscript(index: Index) -> Value {
        get { entries[Int(index.raw)].value }
        _modify { yield &entries[Int(index.raw)].value }
    }

    /// The key at `index`.
    @inlinable
    public func key(at index: Index) -> Key {
        entries[Int(index.raw)].key
    }

    /// Marks the entry as most recently used.
    @inlinable
    public mutating func touch(_ index: Index) {
        let entry = index.raw
        guard head != entry else { return }
        unlink(entry)
        pushFront(entry)
    }

    @inlinable
    mutating func unlink(_ entry: Int32) {
        let prev = entries[Int(entry)].prev
        let next = entries[Int(entry)].next
        if prev >= 0 { entries[Int(prev)].next = next } else { head = next }
        if next >= 0 { entries[Int(next)].prev = prev } else { tail = prev }
    }

    @inlinable
    mutating func pushFront(_ entry: Int32) {
        entries[Int(entry)].prev = -1
        entries[Int(entry)].next = head
        if head >= 0 { entries[Int(head)].prev = entry } else { tail = entry }
        head = entry
    }

    /// Finds `key`, or inserts `fresh()` for it; an idle state found for `key` is replaced by
    /// `fresh()` (lazy expiry). The entry becomes the most recently used.
    ///
    /// - Returns: the entry's index and the live keys evicted to make room, with their states.
    /// - Throws: ``SluiceError/Code/tableBusy`` for a ``WhenFull/refuse`` table full of live keys,
    ///   or for any table when the key alone is larger than what the budget leaves.
    @inlinable
    public mutating func lookup(
        _ key: Key,
        now: Instant,
        orInsert fresh: @autoclosure () -> Value
    ) throws(SluiceError) -> Insertion {
        let hash = Self.hash(key)
        let (position, entry) = probe(key, hash: hash)
        if entry >= 0 {
            let index = Index(entry)
            touch(index)
            if entries[Int(entry)].value.isIdle(at: now) {
                entries[Int(entry)].value = fresh()
                counters.expired &+= 1
            }
            return Insertion(index: index, evicted: [])
        }
        return try insertNew(key, hash: hash, position: position, value: fresh(), now: now)
    }

    /// Inserts `value` for a key known to be absent.
    ///
    /// - Precondition: `index(of: key) == nil`.
    @inlinable
    public mutating func insert(_ key: Key, _ value: Value, now: Instant) throws(SluiceError) -> Insertion {
        let hash = Self.hash(key)
        let (position, entry) = probe(key, hash: hash)
        precondition(entry < 0, "KeyTable.insert: the key is already present")
        return try insertNew(key, hash: hash, position: position, value: value, now: now)
    }

    @inlinable
    mutating func insertNew(
        _ key: Key,
        hash: UInt32,
        position: Int,
        value: Value,
        now: Instant
    ) throws(SluiceError) -> Insertion {
        var position = position
        var evicted: [(key: Key, value: Value)] = []
        let heapBytes = Self.heapBytes(of: key)
        if !hasRoom(forKeyBytes: heapBytes) {
            var swept = false
            // A long key may need the room of several entries.
            while !hasRoom(forKeyBytes: heapBytes) {
                // Room comes first from keys whose state is idle (no different from a fresh
                // key's, so dropping one changes no decision): the least recent, then any the
                // sweep finds. Only then is a live key evicted (or the new key refused).
                if removeIdleTail(now: now) {
                    // Room from an idle key.
                } else if !swept {
                    swept = true
                    _ = sweep(now: now, maxEntries: Self.sweepBeforeEviction)
                } else if tail >= 0, whenFull == .evictLeastRecentlyUsed,
                          fitsInEmptiedTable(keyBytes: heapBytes) {
                    // Checked before the first live key goes: a key that would not fit even
                    // with every entry gone is refused with the table untouched, so no
                    // eviction is ever lost behind the error.
                    evicted.append(remove(entry: tail))
                    counters.evicted &+= 1
                } else {
                    counters.refused &+= 1
                    throw .tableBusy(capacity: capacity)
                }
            }
            position = probe(key, hash: hash).position
        }
        keyHeapBytes += heapBytes
        let entry = Int32(entries.count)
        entries.append(Entry(key: key, value: value, hash: hash))
        slots[position] = entry
        pushFront(entry)
        counters.inserted &+= 1
        return Insertion(index: Index(entry), evicted: evicted)
    }

    /// Drops the least recently used entry if its state is idle (no different from a fresh
    /// key's); returns whether it did.
    @inlinable
    mutating func removeIdleTail(now: Instant) -> Bool {
        guard tail >= 0, entries[Int(tail)].value.isIdle(at: now) else { return false }
        _ = remove(entry: tail)
        counters.expired &+= 1
        return true
    }

    /// Entries the sweep examines for idle keys before a live key is evicted for room.
    public static var sweepBeforeEviction: Int { 64 }

    /// Slot position holding `entry`.
    @inlinable
    func position(ofEntry entry: Int32) -> Int {
        var position = Int(entries[Int(entry)].hash) & mask
        while slots[position] != entry { position = (position + 1) & mask }
        return position
    }

    /// Removes the entry at `index` and returns its key and state. Invalidates indices.
    @inlinable
    @discardableResult
    public mutating func remove(at index: Index) -> (key: Key, value: Value) {
        remove(entry: index.raw)
    }

    /// Removes `key` if present and returns its state.
    @inlinable
    @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        guard let index = index(of: key) else { return nil }
        return remove(entry: index.raw).value
    }

    @inlinable
    mutating func remove(entry: Int32) -> (key: Key, value: Value) {
        // 1. Delete from the index with backward shifting (no tombstones).
        var hole = position(ofEntry: entry)
        slots[hole] = -1
        var next = (hole + 1) & mask
        while slots[next] >= 0 {
            let home = Int(entries[Int(slots[next])].hash) & mask
            // Move slots[next] into the hole unless its home lies cyclically in (hole, next].
            let inRange = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !inRange {
                slots[hole] = slots[next]
                slots[next] = -1
                hole = next
            }
            next = (next + 1) & mask
        }
        // 2. Unlink from the LRU list.
        unlink(entry)
        // 3. Move the last entry into the hole so the arrays stay dense.
        let last = Int32(entries.count - 1)
        if entry != last {
            slots[position(ofEntry: last)] = entry
            let moved = entries[Int(last)]
            if moved.prev >= 0 { entries[Int(moved.prev)].next = entry } else { head = entry }
            if moved.next >= 0 { entries[Int(moved.next)].prev = entry } else { tail = entry }
            entries.swapAt(Int(entry), Int(last))
        }
        let taken = entries.removeLast()
        let removed = (taken.key, taken.value)
        keyHeapBytes -= Self.heapBytes(of: removed.0)
        return removed
    }

    /// Whether one more entry whose key owns `keyBytes` heap bytes fits.
    @inlinable
    func hasRoom(forKeyBytes keyBytes: Int) -> Bool {
        guard entries.count < capacity else { return false }
        guard let byteLimit else { return true }
        return bytesUsed + entryBytes + keyBytes <= byteLimit
    }

    /// Whether an entry whose key owns `keyBytes` heap bytes would fit with every entry gone
    /// (the index and the side-state charges stay).
    @inlinable
    func fitsInEmptiedTable(keyBytes: Int) -> Bool {
        guard let byteLimit else { return true }
        return indexByteCount + chargedBytes + entryBytes + keyBytes <= byteLimit
    }

    // MARK: - Side state

    /// Charges `bytes` of side state (a held request, a timer, a waiting caller) to the budget.
    /// When the budget is spent, idle entries are dropped to make room; live keys are never
    /// evicted for side state.
    ///
    /// - Returns: whether the charge was taken; `false` means the caller must refuse the work
    ///   (and not call ``release(bytes:)``). Without a byte limit, at most
    ///   ``chargeLimit(capacity:)`` charges are held at once.
    @inlinable
    public mutating func charge(bytes: Int, now: Instant) -> Bool {
        if fitsCharge(bytes) || (sweep(now: now, maxEntries: 32) > 0 && fitsCharge(bytes)) {
            chargedBytes += bytes
            chargeCount += 1
            return true
        }
        counters.refusedCharges &+= 1
        return false
    }

    /// How many side-state charges a budget without a byte limit holds at once: 16 per key of
    /// capacity (a request in flight and a few callers waiting for it), and at least 64.
    @inlinable
    public static func chargeLimit(capacity: Int) -> Int {
        Swift.max(64, capacity.multipliedReportingOverflow(by: 16).overflow ? Int.max : capacity * 16)
    }

    /// Returns a charge taken with ``charge(bytes:now:)``.
    @inlinable
    public mutating func release(bytes: Int) {
        chargedBytes -= bytes
        chargeCount -= 1
    }

    @inlinable
    func fitsCharge(_ bytes: Int) -> Bool {
        guard let byteLimit else { return chargeCount < Self.chargeLimit(capacity: capacity) }
        return bytesUsed + bytes <= byteLimit
    }

    /// Examines up to `maxEntries` entries, continuing where the last sweep stopped, and drops the
    /// idle ones. Call it from the loop (e.g. a few hundred entries per iteration) to reclaim memory
    /// from keys that are never seen again.
    ///
    /// - Returns: how many entries were dropped.
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        var examined = 0
        var removed = 0
        while examined < maxEntries, !entries.isEmpty {
            if sweepCursor >= entries.count { sweepCursor = 0 }
            if entries[sweepCursor].value.isIdle(at: now) {
                _ = remove(entry: Int32(sweepCursor))
                removed += 1
                counters.expired &+= 1
            } else {
                sweepCursor += 1
            }
            examined += 1
        }
        return removed
    }

    /// A periodic sweep whose work keeps up with the keys arriving once the table fills: it
    /// examines at least `minimumEntries` entries, and, once the table holds three quarters of
    /// its capacity, twice as many as were inserted since its last run (less those dropped
    /// meanwhile). It first drops idle entries from the least recently used end (where keys go
    /// idle first: an idempotency record, for one, is used last when it completes), then goes
    /// on like ``sweep(now:maxEntries:)``. A sweep of a fixed size falls behind once keys arrive
    /// faster than it examines them, and a full table would then drop idle keys one by one on
    /// the path of new ones.
    ///
    /// - Returns: how many entries were dropped.
    @inlinable
    @discardableResult
    public mutating func sweepKeepingUp(now: Instant, minimumEntries: Int) -> Int {
        let arrivals = Swift.max(0, counters.inserted &- insertedAtLastSweep)
        // The keys dropped since (found idle on lookup, or to make room) count as examined.
        let dropped = Swift.max(0, counters.expired &- expiredAtLastSweep)
        let doubled = arrivals.multipliedReportingOverflow(by: 2)
        var wanted = doubled.overflow ? Int.max : Swift.max(0, doubled.partialValue - dropped)
        // Below three quarters of its capacity the table has room to spare: idle keys cost
        // memory the budget allows and are dropped on demand (room comes from idle keys first),
        // and a key that comes back finds its entry to reuse. Only then does the sweep keep up
        // with the arrivals; until then it examines its minimum, so that it never makes a
        // pause long enough to show in the latency's tail.
        if entries.count < capacity - capacity / 4 { wanted = 0 }
        // No more than one pass over the table: examining an entry twice finds nothing new.
        let budget = Swift.min(entries.count, Swift.max(minimumEntries, wanted))
        var examined = 0
        var removed = 0
        while examined < budget, removeIdleTail(now: now) {
            removed += 1
            examined += 1
        }
        removed += sweep(now: now, maxEntries: budget - examined)
        insertedAtLastSweep = counters.inserted
        expiredAtLastSweep = counters.expired
        return removed
    }

    /// Keys from most to least recently used (for tests and diagnostics).
    public var keysByRecency: [Key] {
        var result: [Key] = []
        result.reserveCapacity(entries.count)
        var entry = head
        while entry >= 0 {
            result.append(entries[Int(entry)].key)
            entry = entries[Int(entry)].next
        }
        return result
    }
}

extension KeyTable: Sendable where Key: Sendable, Value: Sendable {}
extension KeyTable.Entry: Sendable where Key: Sendable, Value: Sendable {}
extension KeyTable.Insertion: Sendable where Key: Sendable, Value: Sendable {}
