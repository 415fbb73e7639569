/// A fixed-size, conservative summary of keys that were evicted from a bounded per-key table
/// while still restricted: for each remembered key it keeps a short fingerprint and a coarse
/// "restricted until" instant.
///
/// A limiter table with a memory budget must evict live keys when it is full; a key evicted while
/// restricted would otherwise come back fresh and pass at once. The table hands such keys to a
/// `RestrictionFilter` (``remember(hash:until:now:)``), and when a key it does not hold arrives it
/// asks the filter (``restrictedUntil(hash:now:)``) before creating a fresh state.
///
/// ## Guarantee
///
/// The error is one-sided. For a key remembered with an `until` that is still in the future, the
/// filter never answers `nil` and never answers an instant earlier than that `until`. It may
/// answer later than the real `until` (by at most one tick, about `horizon / 256`), and it may
/// answer for a key it never saw (a false positive, about `8 × fill / 1,048,575` per query, a
/// few in a million; see ``fill``). When it cannot store an entry at all (the two buckets of every
/// entry it would move are full), it marks one of that entry's buckets: the bucket answers for
/// every key that maps to it until the latest restriction it lost ends (see ``overflows``). The
/// guarantee holds while the caller keeps two promises:
///
/// - `now` never decreases from one call to the next (a monotonic clock). An earlier `now` is
///   treated as the latest one seen.
/// - `until` is at most `now + horizon` (the `horizon` given at init). A later `until` is
///   remembered as (about) `now + horizon`, earlier than asked.
///
/// ## Layout
///
/// A cuckoo filter of 32-bit entries in buckets of four (16 bytes, one quarter of a cache line),
/// `bytes / 16` buckets — any number, not necessarily a power of two. An entry is a 20-bit
/// fingerprint (never 0: an all-zero entry is empty) in its high bits and a 12-bit *tick* in its
/// low bits. Time is cut into ticks of `span = max(1 ns, ⌈horizon / 256⌉)`; an entry stores
/// `⌈until / span⌉ mod 4096`, and is read back relative to `now`: with
/// `nowTick = ⌊now / span⌋` and `d = (stored − nowTick) mod 4096`, the entry is live with
/// `until = (nowTick + d) × span` when `1 ≤ d ≤ 258`, and expired (as good as empty) otherwise.
/// A key's entry lives in one of two buckets: `i1 = mix(hash) mod bucketCount`, or
/// `i2 = (h(fingerprint) − i1) mod bucketCount`, which maps either bucket to the other.
///
/// ## Purging
///
/// A tick stored modulo 4096 comes back into the live range 3,838 ticks after it expired, so an
/// expired entry must be cleared before then. ``purge(now:maxBuckets:)`` clears expired entries
/// bucket by bucket from a cursor; the owner calls it periodically (for instance every
/// `horizon / 8`, `bucketCount / 8 + 1` buckets, so that a full pass takes about one horizon).
///
/// The filter does not depend on that cadence for its guarantee. Every mutating call first
/// checks two things:
///
/// - if 258 ticks or more (about a horizon) have passed since the previous mutating call, every
///   entry has expired (none is remembered for longer than that): the filter empties itself;
/// - otherwise, if the current purge pass started more than 1,024 ticks (about four horizons)
///   ago, it finishes that pass at once before going on.
///
/// Both are rare O(``bucketCount``) catch-ups, needed only when the owner's periodic purge has
/// not kept up. Together they bound the age of any expired entry still stored to
/// 2 × (1,024 + 257) = 2,562 ticks, short of the 3,838 at which it would come back. Queries do
/// not mutate: ``restrictedUntil(hash:now:)`` applies the same two rules while reading (past the
/// first, it reads no entry; within it, the bound already holds).
///
/// The filter is a value type with a single owner (a limiter table on its loop); it is not shared
/// between threads while mutated.
public struct RestrictionFilter: Sendable {
    // MARK: Constants

    /// Entries per bucket.
    static let bucketSize = 4
    /// Bits of tick in an entry (the low bits).
    static let tickBits: UInt32 = 12
    /// The tick field's mask (ticks are stored modulo 4096).
    static let tickMask: UInt32 = (1 << tickBits) - 1
    /// Keys' fingerprints are in `1 ..< fingerprintMax` (20 bits, never 0).
    static let fingerprintMax: UInt64 = (1 << 20) - 1
    /// The fingerprint of a bucket's overflow marker, which matches every key (see ``overflows``).
    static let markerFingerprint = UInt32(fingerprintMax)
    /// Ticks per horizon (the span is `⌈horizon / 256⌉`).
    static let ticksPerHorizon: Int64 = 256
    /// The largest distance, in ticks, from `now` to a stored until that still reads as live.
    /// An `until ≤ now + horizon` is at most 257 ticks after `now`'s tick; one more for slack.
    static let maxLiveTicks: Int64 = 258
    /// A purge pass started longer ago than this many ticks is finished at once on the next call.
    /// An expired entry escapes purging for at most 2 × (this + 257) ticks, which must stay below
    /// 4096 − 258 = 3,838 (the ticks after which an expired entry would read as live again).
    static let passDeadlineTicks: Int64 = 1024
    /// Cuckoo kicks tried before an insertion gives up (see ``overflows``).
    static let maxKicks = 500

    // MARK: State

    /// `bucketCount × 4` entries; bucket `b` is `entries[4b ..< 4b + 4]`. Empty until the first
    /// ``remember(hash:until:now:)``: a table that never evicts a live key never pays for it.
    private var entries: ContiguousArray<UInt32>
    /// The tick length in nanoseconds (≥ 1).
    private let span: Int64
    /// Chooses the entry to kick out; seeded at init, so that runs replay.
    private var random: SplitMix64
    /// The latest `now` tick of a mutating call (`nil` before the first one).
    private var lastTick: Int64?
    /// The tick at which the current purge pass started.
    private var passStart: Int64 = 0
    /// The next bucket the purge visits.
    private var cursor = 0

    /// The number of buckets (`bytes / 16`).
    public let bucketCount: Int

    /// How far past `now` an `until` may lie and still be remembered exactly (rounded up to a
    /// tick): the `horizon` given at init.
    public let horizon: Duration

    /// The entries in use: live ones and expired ones that no purge has cleared yet. Rises when an
    /// entry is written into an empty slot; falls when a purge clears one.
    public private(set) var occupied = 0

    /// How many entries could not be stored (after 500 cuckoo kicks). Above zero, the filter is
    /// too small for its load.
    ///
    /// An entry that cannot be stored is not dropped: one of its key's two buckets gets a
    /// *marker*, an entry whose fingerprint matches every key, until the latest until lost there
    /// (the entry in hand's and, when the marker takes the place of another entry, that one's,
    /// whose key maps to the same bucket). Until then the bucket answers for every key that maps
    /// to it: about 2 in ``bucketCount`` keys per marked bucket, so a filter over its load refuses
    /// more never-seen keys as more buckets are marked, rather than all of them at once. This is
    /// the safe side of the one-sided error.
    public private(set) var overflows = 0

    // MARK: Init

    /// A filter using `bytes` of storage for restrictions at most `horizon` long.
    ///
    /// - Parameters:
    ///   - bytes: The memory the filter may use for its entries: `bytes / 16` buckets of four
    ///     4-byte entries (a remainder below 16 is not used). At least 16.
    ///   - horizon: The longest restriction the filter will be asked to remember: every
    ///     ``remember(hash:until:now:)`` has `until ≤ now + horizon`. Answers are rounded up to a
    ///     tick of `horizon / 256` (at least 1 ns). Greater than zero.
    /// - Throws: ``SluiceError/Code/invalidOption`` when `bytes < 16` or `horizon ≤ 0`.
    public init(bytes: Int, horizon: Duration) throws(SluiceError) {
        guard bytes >= 16 else {
            throw .invalidOption("A restriction filter needs at least 16 bytes (one bucket of four entries).", value: bytes)
        }
        guard horizon > .zero else {
            throw .invalidOption("A restriction filter's horizon must be greater than zero.", value: horizon)
        }
        let nanoseconds = horizon.nanosecondsClamped
        guard nanoseconds > 0 else {
            throw .invalidOption("A restriction filter's horizon must be at least 1 ns.", value: horizon)
        }
        let quotient = nanoseconds / Self.ticksPerHorizon
        let span = nanoseconds % Self.ticksPerHorizon == 0 ? quotient : quotient + 1
        self.span = max(1, span)
        self.horizon = horizon
        self.bucketCount = bytes / 16
        self.entries = []
        self.random = SplitMix64(seed: 0x5EED_F117_E12C_0C00)
    }

    /// A filter that remembers nothing: ``remember(hash:until:now:)`` does nothing and
    /// ``restrictedUntil(hash:now:)`` answers `nil` (the summary of a table that forgets).
    public init() {
        self.span = 1
        self.horizon = .nanoseconds(1)
        self.bucketCount = 0
        self.entries = []
        self.random = SplitMix64(seed: 0x5EED_F117_E12C_0C00)
    }

    // MARK: Gauges

    /// The number of entries (4 per bucket).
    public var capacity: Int { bucketCount * Self.bucketSize }

    /// The bytes of entry storage (16 per bucket).
    public var byteCount: Int { bucketCount * Self.bucketSize * MemoryLayout<UInt32>.size }

    /// ``occupied`` / ``capacity``, from 0 to 1.
    ///
    /// The false-positive rate grows with it (about `8 × fill / 1,048,575` per query), and
    /// inserts start to overflow (see ``overflows``) at about 0.96 (keep it under 0.9). Entries that expired but
    /// were not purged yet count: purge regularly for a faithful gauge.
    public var fill: Double { capacity == 0 ? 0 : Double(occupied) / Double(capacity) }

    /// The length of one tick: answers are rounded up to a multiple of it.
    public var resolution: Duration { .nanoseconds(span) }

    // MARK: Operations

    /// Remembers that the key with hash `hash` is restricted until `until`.
    ///
    /// If the filter already holds an entry for this key (or for another key with the same
    /// fingerprint and buckets, which it cannot tell apart), the later until of the two is kept.
    /// Does nothing when `until ≤ now`. When the entry cannot be placed even after cuckoo kicks,
    /// one of the buckets of the entry left over (this one or one it displaced) is marked (see
    /// ``overflows``).
    ///
    /// - Parameters:
    ///   - hash: A 64-bit hash of the key, the same one later passed to
    ///     ``restrictedUntil(hash:now:)``: it must not change for a key during the filter's
    ///     lifetime (a `hashValue`, seeded once per process, will do). The filter mixes it again,
    ///     so a weak hash costs little, but keys with equal hashes are one key to the filter.
    ///   - until: The end of the restriction; at most `now + horizon` (later is cut to about
    ///     `now + horizon`).
    ///   - now: The current instant; never earlier than the `now` of a previous call.
    public mutating func remember(hash: UInt64, until: Instant, now: Instant) {
        guard bucketCount > 0 else { return }
        if entries.isEmpty {
            let count = bucketCount * Self.bucketSize
            entries = ContiguousArray(unsafeUninitializedCapacity: count) { buffer, initialized in
                LargeArrays.zero(buffer)
                initialized = count
            }
        }
        let nowTick = advance(to: now)
        guard until > now else { return }
        let untilTick = Self.ceilDivide(until.nanoseconds, span)
        let (difference, overflow) = untilTick.subtractingReportingOverflow(nowTick)
        let distance = overflow || difference > Self.maxLiveTicks ? Self.maxLiveTicks : difference
        // Below 1 only when `now` went back (the tick is held at the latest one seen).
        guard distance >= 1 else { return }
        let tick = UInt32(truncatingIfNeeded: nowTick &+ distance) & Self.tickMask
        let (fingerprint, first) = locate(hash)
        let second = alternate(first, fingerprint: fingerprint)
        let entry = fingerprint << Self.tickBits | tick

        if merge(entry, into: first, nowTick: nowTick) || merge(entry, into: second, nowTick: nowTick) { return }
        if place(entry, into: first, nowTick: nowTick) || place(entry, into: second, nowTick: nowTick) { return }

        // Both buckets hold four live entries: kick one out to its other bucket, and so on.
        var inHand = entry
        var bucket = random.next() & 1 == 0 ? first : second
        for _ in 0..<Self.maxKicks {
            var slot = bucket * Self.bucketSize + Int(random.next() % UInt64(Self.bucketSize))
            // A marker belongs to its bucket: it never moves (a bucket holds at most one).
            if entries[slot] >> Self.tickBits == Self.markerFingerprint {
                slot = bucket * Self.bucketSize + (slot - bucket * Self.bucketSize + 1) % Self.bucketSize
            }
            swap(&inHand, &entries[slot])
            bucket = alternate(bucket, fingerprint: inHand >> Self.tickBits)
            // An entry with the same fingerprint in the other bucket has the same two buckets
            // (the alternate depends only on the bucket and the fingerprint): merging is exact.
            if merge(inHand, into: bucket, nowTick: nowTick) || place(inHand, into: bucket, nowTick: nowTick) { return }
        }
        // Every entry moved was live, so the one in hand is too, and `bucket`, one of its two
        // buckets, holds four live entries: mark it (see `overflows`).
        overflows += 1
        mark(bucket, covering: inHand, nowTick: nowTick)
    }

    /// Gives `bucket` a marker that lasts at least as long as `lost` (an entry whose key maps to
    /// `bucket`) and as the entry it replaces, if any: or extends the bucket's marker.
    private mutating func mark(_ bucket: Int, covering lost: UInt32, nowTick: Int64) {
        var distance = liveDistance(lost, nowTick: nowTick)
        let base = bucket * Self.bucketSize
        var slot = base
        for candidate in base..<base + Self.bucketSize where entries[candidate] >> Self.tickBits == Self.markerFingerprint {
            slot = candidate
        }
        // The marker (extended) or the first entry (replaced, its key covered by the marker).
        let replaced = entries[slot]
        distance = max(distance, liveDistance(replaced, nowTick: nowTick))
        if replaced == 0 { occupied += 1 }
        let tick = UInt32(truncatingIfNeeded: nowTick &+ distance) & Self.tickMask
        entries[slot] = Self.markerFingerprint << Self.tickBits | tick
    }

    /// The instant until which the key with hash `hash` is restricted, as far as the filter
    /// knows, or `nil` if it remembers nothing for it.
    ///
    /// Never `nil` and never earlier than the real until for a key remembered with an until after
    /// `now`; it may be later (by up to a tick, or up to a marker's until after an overflow), and
    /// it may be non-`nil` for a key never remembered (a false positive). An answer is always
    /// after `now`.
    ///
    /// Does not mutate the filter: reading needs no purge (see the type's discussion), so a
    /// lookup is a few reads of two buckets.
    ///
    /// - Parameters:
    ///   - hash: The key's 64-bit hash, as passed to ``remember(hash:until:now:)``.
    ///   - now: The current instant; never earlier than the `now` of a previous mutating call.
    public func restrictedUntil(hash: UInt64, now: Instant) -> Instant? {
        lookup(hash: hash, now: now)?.until
    }

    /// ``restrictedUntil(hash:now:)``, saying also whether only an overflow marker answered:
    /// no entry with the key's fingerprint is live in its buckets, so the filter cannot tell
    /// this key from the others that map to a marked bucket (see ``overflows``).
    public func lookup(hash: UInt64, now: Instant) -> Lookup? {
        guard !entries.isEmpty else { return nil }
        guard let lastTick else { return nil }
        let nowTick = max(Self.floorDivide(now.nanoseconds, span), lastTick)
        let (sinceLast, overflow) = nowTick.subtractingReportingOverflow(lastTick)
        // At least `maxLiveTicks` since the last mutating call: every entry has expired (and an
        // entry left unpurged for that long might read as live again, so none is read).
        guard !overflow, sinceLast < Self.maxLiveTicks else { return nil }
        let (fingerprint, first) = locate(hash)
        let second = alternate(first, fingerprint: fingerprint)
        var match = longestMatch(fingerprint, in: first, nowTick: nowTick)
        if second != first {
            let other = longestMatch(fingerprint, in: second, nowTick: nowTick)
            match = (max(match.own, other.own), max(match.marker, other.marker))
        }
        let distance = max(match.own, match.marker)
        guard distance > 0 else { return nil }
        return Lookup(
            until: Instant(nanoseconds: untilNanoseconds(nowTick: nowTick, distance: distance)),
            byMarkerOnly: match.own == 0)
    }

    /// What ``lookup(hash:now:)`` found for a key.
    public struct Lookup: Hashable, Sendable {
        /// The latest until of the entries that answered (its own fingerprint's and markers').
        public var until: Instant
        /// Whether only overflow markers answered: the key may never have been remembered.
        public var byMarkerOnly: Bool
    }

    /// Clears expired entries from up to `maxBuckets` buckets, continuing from where the previous
    /// purge stopped (wrapping around; at most one full pass per call).
    ///
    /// Call it periodically so that a full pass over ``bucketCount`` buckets takes well under
    /// four horizons — for instance every `horizon / 8` with `maxBuckets = bucketCount / 8 + 1`.
    /// Falling behind is safe but costly: the next call then finishes the pass at once (see the
    /// type's discussion).
    ///
    /// - Parameters:
    ///   - now: The current instant; never earlier than the `now` of a previous call.
    ///   - maxBuckets: The most buckets to visit (four entries each); 0 or less visits none but
    ///     still runs the catch-up checks.
    /// - Returns: The number of entries cleared, including any cleared by a catch-up.
    @discardableResult
    public mutating func purge(now: Instant, maxBuckets: Int) -> Int {
        guard !entries.isEmpty else { return 0 }
        let before = occupied
        let nowTick = advance(to: now)
        var budget = min(maxBuckets, bucketCount)
        while budget > 0 {
            purgeBucket(cursor, nowTick: nowTick)
            cursor += 1
            budget -= 1
            if cursor == bucketCount {
                cursor = 0
                passStart = nowTick
            }
        }
        return before - occupied
    }

    // MARK: Time

    /// The tick of `now` (held at the latest one seen if `now` went back), after the catch-ups:
    /// empties the filter when every entry must have expired, and finishes an overdue purge pass.
    private mutating func advance(to now: Instant) -> Int64 {
        var nowTick = Self.floorDivide(now.nanoseconds, span)
        guard let lastTick else {
            lastTick = nowTick
            passStart = nowTick
            return nowTick
        }
        if nowTick <= lastTick {
            nowTick = lastTick
        } else {
            let (sinceLast, overflow) = nowTick.subtractingReportingOverflow(lastTick)
            if overflow || sinceLast >= Self.maxLiveTicks {
                // Nothing stored can be live any more (each until was within `maxLiveTicks` of a
                // call no later than `lastTick`), and none can be read safely: empty the filter.
                removeAll(nowTick: nowTick)
            } else {
                let (sincePassStart, overflow) = nowTick.subtractingReportingOverflow(passStart)
                if overflow || sincePassStart > Self.passDeadlineTicks {
                    finishPass(nowTick: nowTick)
                }
            }
        }
        self.lastTick = nowTick
        return nowTick
    }

    /// Purges the buckets the current pass has not visited yet, and starts a new pass.
    private mutating func finishPass(nowTick: Int64) {
        while cursor < bucketCount {
            purgeBucket(cursor, nowTick: nowTick)
            cursor += 1
        }
        cursor = 0
        passStart = nowTick
    }

    /// Clears every entry, and starts a new pass.
    private mutating func removeAll(nowTick: Int64) {
        if occupied > 0 {
            entries.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
            occupied = 0
        }
        cursor = 0
        passStart = nowTick
    }

    /// Clears the expired entries of `bucket`.
    private mutating func purgeBucket(_ bucket: Int, nowTick: Int64) {
        let base = bucket * Self.bucketSize
        for slot in base..<base + Self.bucketSize {
            let entry = entries[slot]
            if entry != 0 && liveDistance(entry, nowTick: nowTick) == 0 {
                entries[slot] = 0
                occupied -= 1
            }
        }
    }

    /// How many ticks after `nowTick` the entry's until lies (1 ... 258), or 0 if it has expired.
    private func liveDistance(_ entry: UInt32, nowTick: Int64) -> Int64 {
        let nowStored = UInt32(truncatingIfNeeded: nowTick) & Self.tickMask
        let distance = Int64((entry &- nowStored) & Self.tickMask)
        return distance <= Self.maxLiveTicks ? distance : 0
    }

    /// `(nowTick + distance) × span` in nanoseconds, saturating at `Int64.max` (later is safe).
    private func untilNanoseconds(nowTick: Int64, distance: Int64) -> Int64 {
        let (tick, overflow) = nowTick.addingReportingOverflow(distance)
        if overflow { return .max }
        let (nanoseconds, overflow2) = tick.multipliedReportingOverflow(by: span)
        return overflow2 ? .max : nanoseconds
    }

    /// `⌊a / b⌋` for `b > 0`.
    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let quotient = a / b
        return a % b != 0 && a < 0 ? quotient - 1 : quotient
    }

    /// `⌈a / b⌉` for `b > 0`.
    private static func ceilDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let quotient = a / b
        return a % b != 0 && a > 0 ? quotient + 1 : quotient
    }

    // MARK: Buckets

    /// If `bucket` holds a live entry with `entry`'s fingerprint, gives it the later of the two
    /// untils and returns true.
    private mutating func merge(_ entry: UInt32, into bucket: Int, nowTick: Int64) -> Bool {
        let fingerprint = entry >> Self.tickBits
        let base = bucket * Self.bucketSize
        for slot in base..<base + Self.bucketSize {
            let stored = entries[slot]
            guard stored >> Self.tickBits == fingerprint else { continue }
            let storedDistance = liveDistance(stored, nowTick: nowTick)
            guard storedDistance > 0 else { continue }
            if liveDistance(entry, nowTick: nowTick) > storedDistance { entries[slot] = entry }
            return true
        }
        return false
    }

    /// Writes `entry` into an empty or expired slot of `bucket` and returns true, or returns
    /// false if all four hold live entries.
    private mutating func place(_ entry: UInt32, into bucket: Int, nowTick: Int64) -> Bool {
        let base = bucket * Self.bucketSize
        for slot in base..<base + Self.bucketSize {
            let stored = entries[slot]
            if stored == 0 {
                entries[slot] = entry
                occupied += 1
                return true
            }
            if liveDistance(stored, nowTick: nowTick) == 0 {
                entries[slot] = entry  // an expired entry was counted already
                return true
            }
        }
        return false
    }

    /// The largest live distance among `bucket`'s entries with `fingerprint` and its marker, or 0.
    private func longestMatch(_ fingerprint: UInt32, in bucket: Int, nowTick: Int64) -> (own: Int64, marker: Int64) {
        let base = bucket * Self.bucketSize
        var own: Int64 = 0
        var marker: Int64 = 0
        for slot in base..<base + Self.bucketSize {
            let stored = entries[slot]
            let storedFingerprint = stored >> Self.tickBits
            if storedFingerprint == fingerprint {
                own = max(own, liveDistance(stored, nowTick: nowTick))
            } else if storedFingerprint == Self.markerFingerprint {
                marker = max(marker, liveDistance(stored, nowTick: nowTick))
            }
        }
        return (own, marker)
    }

    // MARK: Hashing

    /// A SplitMix64 finalizer: every bit of the result depends on every bit of `x`.
    static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The key's fingerprint (20 bits, never 0 nor the marker's, from the mixed hash's high bits) and first
    /// bucket (the low 44 bits modulo ``bucketCount``).
    func locate(_ hash: UInt64) -> (fingerprint: UInt32, bucket: Int) {
        let mixed = Self.mix(hash)
        let fingerprint = UInt32(truncatingIfNeeded: (mixed >> 44) % (Self.fingerprintMax - 1) + 1)
        let bucket = Int(truncatingIfNeeded: (mixed & 0xFFF_FFFF_FFFF) % UInt64(bucketCount))
        return (fingerprint, bucket)
    }

    /// The other bucket of an entry with `fingerprint` in `bucket`:
    /// `(h(fingerprint) − bucket) mod bucketCount`. Applied twice it gives `bucket` back, for any
    /// bucket count.
    func alternate(_ bucket: Int, fingerprint: UInt32) -> Int {
        let offset = Int(truncatingIfNeeded: Self.mix(UInt64(fingerprint) | 0x5A5A_0000_0000_0000) % UInt64(bucketCount))
        return offset >= bucket ? offset - bucket : offset + bucketCount - bucket
    }
}
