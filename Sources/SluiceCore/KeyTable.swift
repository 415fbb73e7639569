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
    /// Live keys evicted to make room (the first unvisited ones the clock hand reaches).
    public var evicted: Int = 0
    /// Idle keys dropped or reset (lazily, by a sweep, or to make room).
    public var expired: Int = 0
    /// Inserts refused because the table was full of live keys.
    public var refused: Int = 0
    /// Side-state charges refused because the budget was spent (see ``KeyTable/charge(bytes:now:)``).
    public var refusedCharges: Int = 0
    /// Keys not in the table whose state the table's summary of evicted keys restored (a table
    /// that remembers; see ``WhenTableFull/remember``).
    public var summaryRestored: Int = 0
    /// Decisions refused for a key whose state the summary restored, or refused as busy because
    /// only an overflow marker of the summary answered for it (see ``WhenTableFull``).
    public var summaryRefusals: Int = 0
    /// How full the summary is, from 0 to 1 (see ``RestrictionFilter/fill``).
    public var summaryFill: Double = 0
    /// Restrictions the summary could not store, each marking a bucket of it that answers for
    /// every key mapping to it until that restriction ends (see ``RestrictionFilter/overflows``).
    public var summaryOverflows: Int = 0

    public init() {}
}

/// A hash table from full keys to small per-key states, with a fixed capacity, a CLOCK eviction
/// order and lazy plus incremental expiry.
///
/// Layout: each entry — its key, its value, a visited bit and a 32-bit hash — lives in one dense
/// array reserved at full capacity up front (pages are only touched as entries are added, and given
/// back to the system once removals leave 64 KiB of them unused), so that
/// finding a key reads one entry's bytes together rather than one cache line in each of several
/// arrays. An open-addressing index of `UInt32` slots with linear probing is allocated at full size
/// up front (a power of two, at least four thirds of the capacity), so it is at most three quarters
/// full and the table never rehashes — no pause on the loop thread, no freed old index left behind in the heap. A slot
/// holds the entry's position and the top four bits of its hash, so a probe reads only the entry
/// whose tag matches: a lookup reads one slot and (almost always) one entry. The index is kept small
/// (4 bytes a slot, from four thirds of a slot per entry at full capacity up to twice that when
/// the capacity falls just past a power of two) so that more of it stays in the cache. Removal
/// moves the last entry into the hole, so the array stays dense. Per entry this costs
/// `stride(Entry) + 6…11 (index slots)` bytes, where an entry is the key, the value, a byte for the visited bit and 4 bytes of
/// hash, laid out with the alignment's padding: 40 bytes for a `String` key of ≤ 15 UTF-8 bytes
/// and a ``ThrottleState``, 32 with a ``RateLimitState``. Keys are compared in full; the hash only
/// chooses the slot.
///
/// **Eviction order (CLOCK).** A hit sets the entry's visited bit and writes nothing else; no
/// list of neighbours is relinked, so a hit costs no cache miss beyond the slot and the entry. When
/// the table is full, a hand moves over the entries: a visited entry loses its bit and is passed
/// over (a second chance), and the first unvisited entry is the candidate. Room comes first from
/// keys whose state is idle (no different from a fresh key's, so dropping one changes no decision):
/// the candidate if it is idle, then any a short sweep finds. Only then is the candidate evicted
/// although live (``WhenFull/evict``, for throttle and rate tables; counted in
/// ``KeyTableStats/evicted``), or the new key refused with ``SluiceError/Code/tableBusy``
/// (``WhenFull/refuse``, for idempotency and concurrency tables). A key that arrives once and never
/// again (a flood of unique keys) is evicted before keys that come back.
///
/// An ``Index`` stays valid until the next call that inserts or removes an entry.
public struct KeyTable<Key: Hashable, Value: KeyedState> {
    /// What to do when a new key arrives and the table is full of live keys.
    public enum WhenFull: Hashable, Sendable {
        /// Evict a live key: the first unvisited one the clock hand reaches.
        case evict
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
        /// Where the entry lives.
        public var index: Index
        /// Whether the key was absent and was inserted (`false`: found, perhaps reset when idle).
        public var isNew: Bool
        /// Live entries evicted to make room (usually none, at most one unless the new key is
        /// long and the byte budget is spent).
        public var evicted: [(key: Key, value: Value)]

        @inlinable init(index: Index, isNew: Bool, evicted: [(key: Key, value: Value)]) {
            self.index = index
            self.isNew = isNew
            self.evicted = evicted
        }
    }

    /// One key with its state, its visited bit and its hash.
    @usableFromInline struct Entry {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        /// Set on every hit, cleared when the clock hand passes over it.
        @usableFromInline var visited: Bool
        @usableFromInline var hash: UInt32

        @inlinable init(key: Key, value: Value, hash: UInt32) {
            self.key = key
            self.value = value
            self.visited = false
            self.hash = hash
        }
    }

    /// The bits of a slot that hold the entry's position plus one (0: an empty slot).
    @usableFromInline static var positionBits: UInt32 { 0x0FFF_FFFF }

    @usableFromInline var entries: ContiguousArray<Entry>
    @usableFromInline var slots: ContiguousArray<UInt32>
    @usableFromInline var mask: Int
    /// The clock hand: the next entry the eviction order examines.
    @usableFromInline var hand: Int
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
    /// Bytes each entry costs in the table's arrays (key, value, visited bit, hash, extra).
    @usableFromInline let entryBytes: Int
    /// Bytes of the index, allocated (and touched) when the table is created.
    @usableFromInline let indexByteCount: Int
    /// Heap bytes of the keys held.
    @usableFromInline var keyHeapBytes = 0
    /// Bytes the runtime charged for side state.
    @usableFromInline var chargedBytes = 0
    /// Side-state charges held (bounded by ``capacity`` when the budget has no byte limit).
    @usableFromInline var chargeCount = 0
    /// The storage of the last ``Insertion/evicted`` list, handed out again by the next insertion
    /// that evicts a live key: a caller that let go of the last one (as the policies do, at once)
    /// gets its storage back and the eviction allocates nothing; one that keeps it gets a copy.
    /// It keeps the last evicted keys and states alive until then (at most the few entries one
    /// insertion evicts).
    @usableFromInline var evictionList: [(key: Key, value: Value)] = []
    /// The most entries the table held since it last gave the storage past its entries back
    /// (see ``releaseUnusedStorage()``): the entries' pages up to there may be resident.
    @usableFromInline var storageHighWater = 0

    /// The bytes the table holds now: the index, its entries (past their first 4 MiB, with the
    /// rest of the huge page the last one ends in), its keys' heap bytes and the side state
    /// charged to it.
    public var bytesUsed: Int {
        indexByteCount + entries.count * entryBytes + hugePageSlack + keyHeapBytes + chargedBytes
    }

    /// The entries' storage asks for huge pages past its first 4 MiB (see the initializer), and
    /// the system backs a huge page whole once an entry is in it: the rest of the page the last
    /// entry ends in counts too.
    @usableFromInline var hugePageSlack: Int {
        let stride = MemoryLayout<Entry>.stride
        guard entries.count * stride > Self.smallPageEntryBytes else { return 0 }
        return entries.withUnsafeBufferPointer {
            LargeArrays.hugePageSlack(
                $0.baseAddress, used: entries.count * stride, bytes: capacity * stride, skipping: Self.smallPageEntryBytes)
        }
    }

    /// The first bytes of the entries' storage, which stay on small pages.
    @inlinable static var smallPageEntryBytes: Int { 4 << 20 }

    /// The heap bytes `key` owns outside the table (0 for keys stored inline).
    @inlinable
    public static func heapBytes(of key: Key) -> Int {
        if let string = key as? String { return string.heapByteEstimate }
        return 0
    }

    /// Counters.
    public var stats: KeyTableStats { counters }

    /// The most entries a table may have: 2²⁸ − 1 (its index alone is then 2 GiB).
    public static var maximumCapacity: Int { (1 << 28) - 1 }

    /// Estimated bytes per entry at full capacity with the smallest index (four thirds of the
    /// capacity, rounded up to whole bytes); see the type's documentation.
    public static var estimatedBytesPerEntry: Int {
        MemoryLayout<Entry>.stride + 6
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

    /// Slots needed to keep `count` entries at most three quarters full (a power of two).
    @usableFromInline
    static func slotCount(for count: Int) -> Int {
        var slots = 16
        while slots * 3 < count * 4 { slots *= 2 }
        return slots
    }

    static func indexBytes(capacity: Int) -> Int {
        slotCount(for: capacity) * MemoryLayout<UInt32>.stride
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
        // A decision on a table of a million keys misses the TLB less on huge pages (measured: a
        // bare throttle decision, 316 to 274 ns). The entries fill from the front, and the first
        // touch of a huge page zeroes all 2 MiB of it: the first 4 MiB stay on small pages, so
        // that a table that stays small (and a new table's first requests) does not pay that.
        entries.withUnsafeMutableBufferPointer {
            LargeArrays.adviseHugePages(
                $0.baseAddress, bytes: capacity * MemoryLayout<Entry>.stride, skipping: Self.smallPageEntryBytes)
        }
        let slotCount = Self.slotCount(for: capacity)
        slots = ContiguousArray(unsafeUninitializedCapacity: slotCount) { buffer, count in
            LargeArrays.adviseHugePages(buffer.baseAddress, bytes: slotCount * 4)
            LargeArrays.zero(buffer)
            count = slotCount
        }
        mask = slotCount - 1
        hand = 0
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
        KeySlotPrefetcher.hash(key)
    }

    /// A prefetcher for this table's index (see ``KeySlotPrefetcher``).
    @inlinable
    public var slotPrefetcher: KeySlotPrefetcher {
        KeySlotPrefetcher(base: slots.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }, mask: mask)
    }

    /// The slot that points at entry `entry` whose hash is `hash`: its tag and its position plus one.
    @inlinable
    static func slot(entry: Int32, hash: UInt32) -> UInt32 {
        (hash & ~positionBits) | UInt32(entry + 1)
    }

    /// Slot position of `key` (entry ≥ 0) or of the empty slot where it would go (entry == -1).
    @inlinable
    func probe(_ key: Key, hash: UInt32) -> (position: Int, entry: Int32) {
        let tag = hash & ~Self.positionBits
        return slots.withUnsafeBufferPointer { slots in
            entries.withUnsafeBufferPointer { entries in
                var position = Int(hash) & mask
                while true {
                    let slot = slots[position]
                    if slot == 0 { return (position, -1) }
                    if slot & ~Self.positionBits == tag {
                        let entry = Int(slot & Self.positionBits) &- 1
                        if entries[entry].hash == hash && entries[entry].key == key { return (position, Int32(entry)) }
                    }
                    position = (position &+ 1) & mask
                }
            }
        }
    }

    /// The entry for `key`, without marking it visited or expiring it.
    @inlinable
    public func index(of key: Key) -> Index? {
        let found = probe(key, hash: Self.hash(key)).entry
        return found >= 0 ? Index(found) : nil
    }

    /// The entry for `key`, looked for first at `hint` (an index this table gave for `key`
    /// earlier, which a removal since may have moved to another entry), without marking it
    /// visited or expiring it. A hint that still holds `key` costs no hashing and no probe.
    @inlinable
    public func index(of key: Key, hint: Index) -> Index? {
        let raw = Int(hint.raw)
        if raw >= 0, raw < entries.count, entries[raw].key == key { return hint }
        return index(of: key)
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

    /// Marks the entry as used: the clock hand passes over it once before it can be evicted.
    @inlinable
    public mutating func touch(_ index: Index) {
        entries[Int(index.raw)].visited = true
    }

    /// Whether the entry was used since the clock hand last passed over it.
    @inlinable
    public func isVisited(_ index: Index) -> Bool {
        entries[Int(index.raw)].visited
    }

    /// Finds `key`, or inserts `fresh()` for it; an idle state found for `key` is replaced by
    /// `fresh()` (lazy expiry). A key found is marked visited.
    ///
    /// - Returns: the entry's index, whether it is new, and the live keys evicted to make room,
    ///   with their states.
    /// - Throws: ``SluiceError/Code/tableBusy`` for a ``WhenFull/refuse`` table full of live keys,
    ///   or for any table when the key alone is larger than what the budget leaves.
    @inlinable
    public mutating func lookup(
        _ key: Key,
        now: Instant,
        orInsert fresh: @autoclosure () -> Value
    ) throws(SluiceError) -> Insertion {
        try lookup(key, hash: Self.hash(key), now: now, orInsert: fresh())
    }

    /// ``lookup(_:now:orInsert:)`` for a key already hashed with ``KeySlotPrefetcher/hash(_:)``
    /// (whose slot the caller may have prefetched).
    ///
    /// - Precondition: `hash == KeySlotPrefetcher.hash(key)`.
    @inlinable
    public mutating func lookup(
        _ key: Key,
        hash: UInt32,
        now: Instant,
        orInsert fresh: @autoclosure () -> Value
    ) throws(SluiceError) -> Insertion {
        switch find(key, hash: hash, now: now, resettingIdleTo: fresh()) {
        case .found(let index):
            return Insertion(index: index, isNew: false, evicted: [])
        case .absent(let position):
            return try insertNew(key, hash: hash, position: position, value: fresh(), now: now)
        }
    }

    /// Where ``find(_:hash:now:resettingIdleTo:)`` found a key.
    @usableFromInline
    enum Found {
        /// The key's entry.
        case found(Index)
        /// Not in the table: the index slot where ``insertNew(_:hash:position:value:now:)``
        /// puts it (valid until the table changes).
        case absent(position: Int)
    }

    /// The first half of ``lookup(_:hash:now:orInsert:)``: the entry of `key`, marked visited and
    /// reset to `fresh()` when idle, or where a new entry for it would go. Changes nothing for
    /// a key the table does not hold, so that its caller can choose its state (or refuse it)
    /// before anything is evicted for it.
    @inlinable
    mutating func find(_ key: Key, hash: UInt32, now: Instant, resettingIdleTo fresh: @autoclosure () -> Value) -> Found {
        let (position, entry) = probe(key, hash: hash)
        guard entry >= 0 else { return .absent(position: position) }
        entries.withUnsafeMutableBufferPointer { entries in
            entries[Int(entry)].visited = true
            if entries[Int(entry)].value.isIdle(at: now) {
                entries[Int(entry)].value = fresh()
                counters.expired &+= 1
            }
        }
        return .found(Index(entry))
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
            // The storage of the last list of evicted entries, emptied (see `evictionList`).
            swap(&evicted, &evictionList)
            evicted.removeAll(keepingCapacity: true)
            defer { evictionList = evicted }
            var swept = false
            // A long key may need the room of several entries.
            while !hasRoom(forKeyBytes: heapBytes) {
                // Room comes first from keys whose state is idle (no different from a fresh
                // key's, so dropping one changes no decision): the clock's candidate, else the
                // first idle entry a short look ahead of the hand finds (the hand moves there;
                // the live entries it passes stay), else those a short sweep drops. Only then is
                // the live candidate evicted (or the new key refused).
                let candidate = clockCandidate()
                var victim = candidate
                var isIdle = candidate >= 0 && entries[Int(candidate)].value.isIdle(at: now)
                if candidate >= 0, !isIdle, let idle = idleEntry(after: candidate, now: now) {
                    victim = idle
                    isIdle = true
                }
                if !isIdle, !swept {
                    // Last, the sweep's next stretch (elsewhere in the table) is examined too.
                    swept = true
                    if sweep(now: now, maxEntries: Self.sweepBeforeEviction) > 0 { continue }
                }
                guard isIdle || (victim >= 0 && whenFull == .evict
                    // Checked before the first live key goes: a key that would not fit even
                    // with every entry gone is refused with the table untouched, so no
                    // eviction is ever lost behind the error.
                    && fitsInEmptiedTable(keyBytes: heapBytes))
                else {
                    counters.refused &+= 1
                    throw .tableBusy(capacity: capacity)
                }
                if isIdle { counters.expired &+= 1 } else { counters.evicted &+= 1 }
                if hasRoom(forKeyBytes: heapBytes, replacing: victim) {
                    // The new key takes the victim's place, and the hand steps past it: a whole
                    // turn of the clock before it is a candidate itself.
                    let taken = replace(entry: victim, key: key, hash: hash, value: value, keyBytes: heapBytes)
                    if !isIdle { evicted.append(taken) }
                    return Insertion(index: Index(victim), isNew: true, evicted: evicted)
                }
                let taken = removeAtHand(victim)
                if !isIdle { evicted.append(taken) }
            }
            position = probe(key, hash: hash).position
        }
        keyHeapBytes += heapBytes
        let entry = Int32(entries.count)
        entries.append(Entry(key: key, value: value, hash: hash))
        if entries.count > storageHighWater { storageHighWater = entries.count }
        slots[position] = Self.slot(entry: entry, hash: hash)
        counters.inserted &+= 1
        return Insertion(index: Index(entry), isNew: true, evicted: evicted)
    }

    /// Most visited entries the hand passes over in one call before it takes the next entry
    /// anyway (bounds the pause when every entry was used since the last pass).
    @inlinable
    static var secondChancesPerCall: Int { 1_024 }

    /// Moves the clock hand past visited entries (clearing their bit) and returns the entry it
    /// stops at, or -1 for an empty table.
    @inlinable
    mutating func clockCandidate() -> Int32 {
        let count = entries.count
        guard count > 0 else { return -1 }
        return entries.withUnsafeMutableBufferPointer { entries in
            var passed = 0
            if hand >= count { hand = 0 }
            while entries[hand].visited, passed < Self.secondChancesPerCall {
                entries[hand].visited = false
                passed += 1
                hand += 1
                if hand == count { hand = 0 }
            }
            return Int32(hand)
        }
    }

    /// The first idle entry among the ``sweepBeforeEviction`` that follow `entry` in the clock's
    /// order (wrapping), if any.
    @inlinable
    func idleEntry(after entry: Int32, now: Instant) -> Int32? {
        let count = entries.count
        return entries.withUnsafeBufferPointer { entries in
            var position = Int(entry)
            for _ in 0..<Swift.min(Self.sweepBeforeEviction, count - 1) {
                position += 1
                if position == count { position = 0 }
                if entries[position].value.isIdle(at: now) { return Int32(position) }
            }
            return nil
        }
    }

    /// Removes `entry`, where the clock hand now stops. The last entry moves into its place; the
    /// hand steps past it, so the key inserted most recently is not the next candidate.
    @inlinable
    mutating func removeAtHand(_ entry: Int32) -> (key: Key, value: Value) {
        let removed = remove(entry: entry)
        hand = Int(entry) + 1
        return removed
    }

    /// Whether an entry whose key owns `keyBytes` heap bytes fits in place of `entry`.
    @inlinable
    func hasRoom(forKeyBytes keyBytes: Int, replacing entry: Int32) -> Bool {
        guard let byteLimit else { return true }
        return bytesUsed - Self.heapBytes(of: entries[Int(entry)].key) + keyBytes <= byteLimit
    }

    /// Puts a new key in place of `entry` (which the clock hand points at) and steps the hand
    /// past it. Returns the key and state replaced.
    @inlinable
    mutating func replace(entry: Int32, key: Key, hash: UInt32, value: Value, keyBytes: Int) -> (key: Key, value: Value) {
        deleteSlot(at: position(ofEntry: entry))
        let replaced = entries[Int(entry)]
        keyHeapBytes += keyBytes - Self.heapBytes(of: replaced.key)
        entries[Int(entry)] = Entry(key: key, value: value, hash: hash)
        slots[probe(key, hash: hash).position] = Self.slot(entry: entry, hash: hash)
        hand = Int(entry) + 1
        counters.inserted &+= 1
        prefetchCandidateSlot()
        return (replaced.key, replaced.value)
    }

    /// Starts loading the index slot where the entry at the clock hand has its home: the next
    /// replacement most often takes that entry, and finding its slot is then a miss from memory
    /// (the entry itself, next in line, is streamed in by the hardware). A hint: the hand may
    /// pass the entry first, and nothing depends on it.
    @inlinable
    func prefetchCandidateSlot() {
        guard hand < entries.count else { return }
        slotPrefetcher.prefetch(hash: entries[hand].hash)
    }

    /// Entries examined for an idle key ahead of the clock's candidate before a live key is
    /// evicted (or a new key refused) for room.
    public static var sweepBeforeEviction: Int { 128 }

    /// Slot position holding `entry`.
    @inlinable
    func position(ofEntry entry: Int32) -> Int {
        let wanted = UInt32(entry + 1)
        return slots.withUnsafeBufferPointer { slots in
            var position = Int(entries[Int(entry)].hash) & mask
            while slots[position] & Self.positionBits != wanted { position = (position &+ 1) & mask }
            return position
        }
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

    /// Empties the index slot at `position`, with backward shifting (no tombstones).
    @inlinable
    mutating func deleteSlot(at position: Int) {
        var hole = position
        slots[hole] = 0
        var next = (hole + 1) & mask
        while slots[next] != 0 {
            let home = Int(entries[Int(slots[next] & Self.positionBits) - 1].hash) & mask
            // Move slots[next] into the hole unless its home lies cyclically in (hole, next].
            let inRange = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !inRange {
                slots[hole] = slots[next]
                slots[next] = 0
                hole = next
            }
            next = (next + 1) & mask
        }
    }

    @inlinable
    mutating func remove(entry: Int32) -> (key: Key, value: Value) {
        deleteSlot(at: position(ofEntry: entry))
        // Move the last entry into the hole so the array stays dense.
        let last = Int32(entries.count - 1)
        if entry != last {
            slots[position(ofEntry: last)] = Self.slot(entry: entry, hash: entries[Int(last)].hash)
            entries.swapAt(Int(entry), Int(last))
        }
        let taken = entries.removeLast()
        let removed = (taken.key, taken.value)
        keyHeapBytes -= Self.heapBytes(of: removed.0)
        releaseUnusedStorageIfLarge()
        return removed
    }

    /// Entries whose storage, once the table no longer holds them, is given back to the system
    /// (64 KiB of it).
    @inlinable
    static var entriesPerRelease: Int { Swift.max(1, (64 << 10) / MemoryLayout<Entry>.stride) }

    /// ``releaseUnusedStorage()`` when 64 KiB of storage past the entries is unused. Out of line:
    /// inlined into a removal, which is inlined into the lookup that makes room, its code made a
    /// throttled decision through the gate measurably slower (gate-profile, alternating runs).
    @usableFromInline @inline(never)
    mutating func releaseUnusedStorageIfLarge() {
        if storageHighWater - entries.count >= Self.entriesPerRelease { releaseUnusedStorage() }
    }

    /// Gives the pages of the storage past the entries held back to the system.
    ///
    /// The budget counts the entries the table holds, but the pages of entries it held once
    /// stay resident after they are removed: a table that filled with keys stored inline and
    /// then took long keys (whose heap bytes evict several entries each) or side state would
    /// hold its budget in those and, besides, every page its entries ever touched. A removal
    /// that leaves 64 KiB of storage unused past the entries gives it back, so that the
    /// process's memory stays within the budgets it counts (within 64 KiB a table).
    @usableFromInline
    mutating func releaseUnusedStorage() {
        let count = entries.count
        // Within this storage: a copy of the table that was then changed has storage of its
        // own, which may be smaller than the high-water mark it copied.
        let highWater = Swift.min(storageHighWater, entries.capacity)
        entries.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            LargeArrays.release(
                UnsafeMutableRawPointer(base), from: count * MemoryLayout<Entry>.stride,
                to: highWater * MemoryLayout<Entry>.stride)
        }
        storageHighWater = count
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

    /// Examines up to `maxEntries` entries (each at most once), continuing where the last sweep stopped, and drops the
    /// idle ones. Call it from the loop (e.g. a few hundred entries per iteration) to reclaim memory
    /// from keys that are never seen again.
    ///
    /// - Returns: how many entries were dropped.
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        var examined = 0
        var removed = 0
        // The cursor moves down the storage: removing an entry moves the last one into its place,
        // and that one lies above the cursor (examined already, or inserted since), so each step
        // examines an entry not seen yet in this pass. A sweep of the whole table starts at the
        // top and examines each entry once (twice would find it as it was).
        if maxEntries >= entries.count { sweepCursor = entries.count }
        let limit = Swift.min(maxEntries, entries.count)
        while examined < limit, !entries.isEmpty {
            if sweepCursor <= 0 || sweepCursor > entries.count { sweepCursor = entries.count }
            sweepCursor -= 1
            if entries[sweepCursor].value.isIdle(at: now) {
                _ = remove(entry: Int32(sweepCursor))
                removed += 1
                counters.expired &+= 1
            }
            examined += 1
        }
        return removed
    }

    /// A periodic sweep whose work keeps up with the keys arriving once the table fills: it
    /// examines at least `minimumEntries` entries, and, once the table holds three quarters of
    /// its capacity, twice as many as were inserted since its last run (less those dropped
    /// meanwhile), continuing where the last sweep stopped, like ``sweep(now:maxEntries:)``. A sweep of a fixed size falls behind once keys arrive
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
        let removed = sweep(now: now, maxEntries: budget)
        insertedAtLastSweep = counters.inserted
        expiredAtLastSweep = counters.expired
        return removed
    }

    /// The keys held, in the order of the table's storage, which the clock hand follows (for
    /// tests and diagnostics).
    public var keys: [Key] { entries.map(\.key) }
}

extension KeyTable: Sendable where Key: Sendable, Value: Sendable {}
extension KeyTable.Entry: Sendable where Key: Sendable, Value: Sendable {}
extension KeyTable.Insertion: Sendable where Key: Sendable, Value: Sendable {}
