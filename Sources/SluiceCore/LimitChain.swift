/// An ordered chain of limit stages (GCRA rate limits and concurrency limits), each over its own
/// keys, decided all-or-nothing: a request passes every stage or takes nothing from any.
///
/// A pure state machine, like every policy here: the caller passes `now` and the request's key
/// for each stage, and gets a ``ChainAdmission``.
///
/// - A request is admitted when every stage admits it (a stage in shadow mode always does, and
///   counts what it would have refused).
/// - When stage *k* refuses, stages 1…*k*−1 give back exactly this request's own part: its cost
///   is subtracted from each GCRA state (never an earlier state restored, so what other requests
///   spent in between is kept) and each concurrency slot it took is freed. Stage *k* itself took
///   nothing, and the stages after it were not asked.
/// - An admitted request holds its concurrency slots until ``release(_:keys:)``; its GCRA units
///   are spent (``rollBack(_:keys:cost:now:)`` gives them back, when the runtime then refuses the
///   request for another reason).
/// - A key a stage's table cannot hold (a concurrency table full of keys in flight, a key larger
///   than the budget) makes the request ``ChainAdmission/Result/busy(stage:)``, rolled back the
///   same way.
public struct LimitChain<Key: Hashable> {
    /// Where a stage's table is: in `rates` or in `slots`, at `index`.
    @usableFromInline
    enum Place: Hashable, Sendable {
        case rate(Int)
        case concurrency(Int)
    }

    /// The stages, in order.
    public let stages: [ChainStage]
    @usableFromInline let places: [Place]
    @usableFromInline var rates: [RateLimitTable<Key>] = []
    @usableFromInline var slots: [ConcurrencyLimitTable<Key>] = []

    /// The most stages a chain has.
    public static var maximumStages: Int { 16 }

    /// A chain of `stages`, each keeping its keys within `budget`.
    ///
    /// - Throws: ``SluiceError/Code/invalidOption`` for more than ``maximumStages`` stages, two
    ///   stages with one name, or a budget that holds no key.
    public init(stages: [ChainStage], budget: MemoryBudget) throws(SluiceError) {
        guard stages.count <= Self.maximumStages else {
            throw .invalidOption("A chain has at most \(Self.maximumStages) stages.", value: stages.count)
        }
        var names = Set<String>()
        var places: [Place] = []
        for stage in stages {
            guard names.insert(stage.name).inserted else {
                throw .invalidOption("Two stages of a chain share a name.", value: stage.name)
            }
            switch stage.limit {
            case .rate(let options):
                places.append(.rate(rates.count))
                rates.append(try RateLimitTable(options: options, budget: budget))
            case .concurrency(let limit):
                places.append(.concurrency(slots.count))
                slots.append(try ConcurrencyLimitTable(limit: limit, budget: budget))
            }
        }
        self.stages = stages
        self.places = places
    }

    /// Whether the chain has no stage.
    @inlinable
    public var isEmpty: Bool { stages.isEmpty }

    /// Decides about a request of `cost` units whose key for stage *i* is `keys[i]`.
    ///
    /// - Precondition: `keys.count == stages.count`.
    @inlinable
    public mutating func admit(keys: [Key], cost: Int, now: Instant) -> ChainAdmission {
        var admission = ChainAdmission()
        admit(keys: keys, cost: cost, now: now, into: &admission)
        return admission
    }

    /// ``admit(keys:cost:now:)`` into `admission`, whose buffers it reuses: deciding allocates
    /// nothing once they have grown.
    ///
    /// - Precondition: `keys.count == stages.count`.
    @inlinable
    public mutating func admit(keys: [Key], cost: Int, now: Instant, into admission: inout ChainAdmission) {
        precondition(keys.count == stages.count, "a chain takes one key per stage")
        admission.result = .admitted
        admission.hold = ChainHold()
        if !admission.verdicts.isEmpty { admission.verdicts.removeAll(keepingCapacity: true) }
        if !admission.shadowRefusals.isEmpty { admission.shadowRefusals.removeAll(keepingCapacity: true) }
        // Each stage's hash, kept for the later stages of this call only: a key an earlier stage
        // had (an account limited by rate and by concurrency) is hashed once.
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: keys.count) { hashes in
            for index in places.indices {
                let key = keys[index]
                var hash: UInt32?
                for earlier in 0..<index where keys[earlier] == key {
                    hash = hashes[earlier]
                    break
                }
                let keyHash = hash ?? KeySlotPrefetcher.hash(key)
                hashes[index] = keyHash
                let verdict: (verdict: StageVerdict, entry: Int32)
                do {
                    verdict = try decide(stage: index, key: key, hash: keyHash, cost: cost, now: now)
                } catch {
                    rollBack(admission.hold, keys: keys, cost: cost, now: now)
                    admission.hold = ChainHold()
                    admission.result = .busy(stage: index)
                    return
                }
                admission.verdicts.append(verdict.verdict)
                if verdict.verdict.allowed {
                    admission.hold.insert(index, entry: verdict.entry)
                } else if stages[index].shadow {
                    admission.shadowRefusals.append(index)
                } else {
                    rollBack(admission.hold, keys: keys, cost: cost, now: now)
                    admission.hold = ChainHold()
                    admission.result = .refused(stage: index)
                    return
                }
            }
        }
    }

    /// Whether some stage is a rate stage.
    @inlinable
    public var hasRateStages: Bool {
        !rates.isEmpty
    }

    /// Stage `index`'s verdict, and for a concurrency stage the key's entry in its table (else
    /// -1), which the hold keeps as a hint for the release.
    @inlinable
    mutating func decide(
        stage index: Int, key: Key, hash: UInt32, cost: Int, now: Instant
    ) throws(SluiceError) -> (verdict: StageVerdict, entry: Int32) {
        switch places[index] {
        case .rate(let table):
            return (.rate(try rates[table].check(key: key, hash: hash, now: now, quantity: cost)), -1)
        case .concurrency(let table):
            let taken = try slots[table].acquireEntry(key: key, hash: hash, now: now)
            return (.concurrency(limit: slots[table].limit, inFlight: taken.inFlight, allowed: taken.allowed), taken.entry.raw)
        }
    }

    /// Frees the slot stage `index` (a concurrency stage, table `table`) took for `key`, found
    /// through the hold's hint when it has one.
    @inlinable
    mutating func releaseSlot(table: Int, stage index: Int, key: Key, hold: ChainHold) {
        slots[table].release(key: key, hint: hold.entry(of: index).map { KeyTable<Key, ConcurrencyState>.Index($0) })
    }

    /// Gives back everything `hold` took: each GCRA stage's `cost` (subtracted, see
    /// ``RateLimitState/refund(quantity:now:options:)``) and each concurrency slot.
    @inlinable
    public mutating func rollBack(_ hold: ChainHold, keys: [Key], cost: Int, now: Instant) {
        guard !hold.isEmpty else { return }
        for index in places.indices where hold.contains(index) {
            switch places[index] {
            case .rate(let table): rates[table].refund(key: keys[index], quantity: cost, now: now)
            case .concurrency(let table): releaseSlot(table: table, stage: index, key: keys[index], hold: hold)
            }
        }
    }

    /// The execution of an admitted request ended: frees the concurrency slots `hold` took (its
    /// GCRA units stay spent).
    @inlinable
    public mutating func release(_ hold: ChainHold, keys: [Key]) {
        guard !hold.isEmpty else { return }
        for index in places.indices where hold.contains(index) {
            if case .concurrency(let table) = places[index] {
                releaseSlot(table: table, stage: index, key: keys[index], hold: hold)
            }
        }
    }

    /// What stage `index` would report for `key` now, without changing anything: a rate stage's
    /// remaining units and reset time, a concurrency stage's slots in flight.
    public func peek(stage index: Int, key: Key, now: Instant) -> StageVerdict {
        switch places[index] {
        case .rate(let table):
            let limiter = rates[table]
            var state = limiter.peekState(of: key, now: now)
            return .rate(state.check(now: now, options: limiter.options, quantity: 0))
        case .concurrency(let table):
            let inFlight = slots[table].inFlight(key: key)
            return .concurrency(limit: slots[table].limit, inFlight: inFlight, allowed: inFlight < slots[table].limit)
        }
    }

    /// Drops up to `maxEntries` idle keys of each stage's table.
    public mutating func sweep(now: Instant, maxEntries: Int) {
        for index in rates.indices { rates[index].sweepKeepingUp(now: now, minimumEntries: maxEntries) }
        for index in slots.indices { slots[index].table.sweepKeepingUp(now: now, minimumEntries: maxEntries) }
    }

    /// Keys held over every stage's table.
    public var keyCount: Int {
        rates.reduce(0) { $0 + $1.table.count } + slots.reduce(0) { $0 + $1.table.count }
    }
}

/// The stages of a chain whose part a request holds (GCRA units spent, concurrency slots taken).
///
/// For the first ``hintedStages`` stages it also keeps where a concurrency stage's table had the
/// key when the slot was taken, so that freeing the slot need not hash and look the key up
/// again. That is a hint, checked against the key when used (a removal of another key may
/// have moved the entry), and no part of what the hold is: two holds of the same stages are
/// equal.
public struct ChainHold: Hashable, Sendable {
    @usableFromInline var bits: UInt32
    /// The entry of each of the first stages in its table, -1 when none is kept. A vector, so
    /// a hold is 32 bytes, aligned to 16; kept as four plain fields (20 bytes) instead, the
    /// chain benchmark (gate-profile chain) ran about a tenth slower.
    @usableFromInline var entries: SIMD4<Int32>

    /// How many of the first stages keep a hint.
    @inlinable
    public static var hintedStages: Int { 4 }

    /// Nothing held.
    @inlinable
    public init() {
        bits = 0
        entries = SIMD4(repeating: -1)
    }

    /// Whether stage `index` is held.
    @inlinable
    public func contains(_ index: Int) -> Bool { bits & (1 << UInt32(index)) != 0 }

    /// Marks stage `index` held.
    @inlinable
    public mutating func insert(_ index: Int) { bits |= 1 << UInt32(index) }

    /// Marks stage `index` held, its key at `entry` of the stage's table (-1: not kept).
    @inlinable
    mutating func insert(_ index: Int, entry: Int32) {
        insert(index)
        if index < Self.hintedStages { entries[index] = entry }
    }

    /// Where stage `index`'s table had the key when the stage was taken, if kept.
    @inlinable
    func entry(of index: Int) -> Int32? {
        guard index < Self.hintedStages, entries[index] >= 0 else { return nil }
        return entries[index]
    }

    /// Whether nothing is held.
    @inlinable
    public var isEmpty: Bool { bits == 0 }

    /// Two holds are equal when they hold the same stages (the hints are not compared).
    @inlinable
    public static func == (lhs: ChainHold, rhs: ChainHold) -> Bool { lhs.bits == rhs.bits }

    @inlinable
    public func hash(into hasher: inout Hasher) { hasher.combine(bits) }
}

/// What a ``LimitChain`` decided about one request.
public struct ChainAdmission: Hashable, Sendable {
    /// Admitted, or which stage refused.
    public enum Result: Hashable, Sendable {
        /// Every stage admitted it (shadow stages that would have refused included).
        case admitted
        /// Stage `stage` refused; the stages before it gave back what it took.
        case refused(stage: Int)
        /// Stage `stage`'s table could not hold the key; the stages before it gave back what it
        /// took.
        case busy(stage: Int)
    }

    /// The decision.
    public var result: Result = .admitted
    /// Each stage's verdict, in order, up to the one that refused (included).
    public var verdicts: [StageVerdict] = []
    /// Stages in shadow mode that would have refused it.
    public var shadowRefusals: [Int] = []
    /// What the request holds when admitted (nothing otherwise).
    public var hold = ChainHold()

    /// An admission of a chain without stages.
    @inlinable
    public init() {}
}
