import SluiceCore
import SluiceLibevent
import Synchronization

/// A ``SharedStore`` in this process's memory: the reference implementation of the store
/// protocol, and a store that several gates in one process can share (as instances share Redis).
///
/// Its clock is its own (`now`), as Redis's is: the gates' clocks never enter a decision. It
/// can be made unavailable (``setAvailable(_:)``) to exercise a plugin's ``StoreFailureMode``.
/// It holds at most `capacity` keys; expired state is dropped on access and when it is full,
/// and a call that finds it full of live state fails (`unavailable`) rather than evicting a record.
public final class MemoryStore: SharedStore {
    private struct Record {
        var fingerprint: String
        var lease: StoreLease
        /// Lease end while running, retention end once completed (nanoseconds).
        var expiresAt: Int64
        var result: [UInt8]?
    }

    private struct State {
        var windows: [StoreKey: Int64] = [:]
        var limits: [StoreKey: RateLimitState] = [:]
        var records: [StoreKey: Record] = [:]
        /// The windows of throttle stages: when each opened and until when it holds.
        var stageWindows: [StoreKey: (start: Int64, until: Int64)] = [:]
        /// The slots of concurrency stages: each owner's lease end.
        var slots: [StoreKey: [String: Int64]] = [:]
        var available = true
        var calls = 0
        /// The epoch of the fences it grants (see ``FencingToken``), and the claims counted in it.
        var epoch: UInt64
        var claims: UInt32 = 0
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> Instant
    private let capacity: Int

    /// A store reading time from `now` (the monotonic clock by default), holding at most
    /// `capacity` keys of each kind. Its first epoch is the wall clock's millisecond (`epoch`,
    /// when given), so that a store made again after a restart grants greater fences.
    public init(
        capacity: Int = 1 << 20, epoch: UInt64? = nil, now: @escaping @Sendable () -> Instant = { SluiceLoop.monotonicNow() }
    ) {
        self.capacity = max(1, capacity)
        self.now = now
        self.state = Mutex(State(epoch: epoch ?? Self.wallClockMillisecond()))
    }

    private static func wallClockMillisecond() -> UInt64 {
        UInt64(clamping: SluiceLoop.wallClockMilliseconds())
    }

    /// Forgets every window, limit and record, as a store restarted without persistence would,
    /// and starts a new epoch (the next one, or the wall clock's millisecond if later): the fences
    /// it grants from now on are greater than every earlier one, and no earlier lease is
    /// current again.
    public func loseData() {
        let millisecond = Self.wallClockMillisecond()
        state.withSanitizedLock { state in
            state.windows = [:]
            state.limits = [:]
            state.records = [:]
            state.stageWindows = [:]
            state.slots = [:]
            state.epoch = max(state.epoch &+ 1, millisecond)
            state.claims = 0
        }
    }

    /// The current epoch.
    public var epoch: UInt64 { state.withSanitizedLock { $0.epoch } }

    /// Makes every later call fail (`false`) or succeed again (`true`).
    public func setAvailable(_ available: Bool) {
        state.withSanitizedLock { $0.available = available }
    }

    /// Calls answered so far (failed ones included).
    public var calls: Int { state.withSanitizedLock { $0.calls } }

    /// Whether it is switched on (``setAvailable(_:)``).
    public func isReachable(from caller: any StoreCaller) -> Bool {
        state.withSanitizedLock { $0.available }
    }

    private func answer<Value: Sendable>(
        on caller: any StoreCaller, _ completion: @escaping @Sendable (Result<Value, StoreError>) -> Void,
        _ body: (inout State, Int64) -> Result<Value, StoreError>
    ) {
        let t = now().nanoseconds
        let result = state.withSanitizedLock { state -> Result<Value, StoreError> in
            state.calls += 1
            guard state.available else { return .failure(StoreError(code: .unavailable, message: "the memory store is switched off")) }
            return body(&state, t)
        }
        caller.execute { completion(result) }
    }

    private static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b < 0 ? .min : .max) : sum
    }

    private static let full = StoreError(code: .unavailable, message: "the memory store is full")

    public func throttle(
        _ key: StoreKey, interval: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Duration?, StoreError>) -> Void
    ) {
        let window = interval.nanosecondsClamped
        answer(on: caller, completion) { state, t in
            if let last = state.windows[key], t < Self.add(last, window) {
                return .success(.nanoseconds(Self.add(last, window) - t))
            }
            if state.windows[key] == nil, state.windows.count >= capacity {
                state.windows = state.windows.filter { t < Self.add($0.value, window) }
                guard state.windows.count < capacity else { return .failure(Self.full) }
            }
            state.windows[key] = t
            return .success(nil)
        }
    }

    public func rateLimit(
        _ key: StoreKey, options: RateLimitOptions, cost: Int, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<RateLimitDecision, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            let instant = Instant(nanoseconds: t)
            if state.limits[key] == nil, state.limits.count >= capacity {
                state.limits = state.limits.filter { !$0.value.isIdle(at: instant) }
                guard state.limits.count < capacity else { return .failure(Self.full) }
            }
            var limit = state.limits[key] ?? RateLimitState()
            let decision = limit.check(now: instant, options: options, quantity: cost)
            state.limits[key] = limit
            return .success(decision)
        }
    }

    public func claim(
        _ record: StoreKey, fingerprint: String, owner: String, lease: Duration, retention: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreClaim, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            if let existing = state.records[record], t < existing.expiresAt {
                if existing.fingerprint != fingerprint { return .success(.mismatch(storedFingerprint: existing.fingerprint)) }
                if let result = existing.result { return .success(.completed(result)) }
                return .success(.running)
            }
            if state.records[record] == nil, state.records.count >= capacity {
                state.records = state.records.filter { t < $0.value.expiresAt }
                guard state.records.count < capacity else { return .failure(Self.full) }
            }
            // One counter for every record: each claim's fence is greater than any granted
            // before, whatever record it was for.
            if state.claims == FencingToken.maximumCounter {
                state.epoch &+= 1
                state.claims = 0
            }
            state.claims += 1
            let granted = StoreLease(owner: owner, fence: FencingToken(epoch: state.epoch, counter: state.claims))
            state.records[record] = Record(
                fingerprint: fingerprint, lease: granted, expiresAt: Self.add(t, lease.nanosecondsClamped), result: nil)
            return .success(.claimed(granted))
        }
    }

    public func renew(
        _ record: StoreKey, lease: StoreLease, fingerprint: String, duration: Duration, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            // A claim replaces the record's lease: the same lease means no one claimed it since,
            // even if it ran out.
            guard var existing = state.records[record], existing.lease == lease, existing.result == nil else {
                return .success(false)
            }
            existing.expiresAt = Self.add(t, duration.nanosecondsClamped)
            state.records[record] = existing
            return .success(true)
        }
    }

    public func complete(
        _ record: StoreKey, lease: StoreLease, fingerprint: String, result: [UInt8], retention: Duration,
        on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            // A lease that ran out is still current until another owner claims the record (the
            // claim raises the fence): its owner may complete it late.
            guard var existing = state.records[record], existing.lease == lease else { return .success(false) }
            if existing.result != nil { return .success(existing.result == result) }
            existing.result = result
            existing.expiresAt = Self.add(t, retention.nanosecondsClamped)
            state.records[record] = existing
            return .success(true)
        }
    }

    public func release(
        _ record: StoreKey, lease: StoreLease, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            guard let existing = state.records[record], existing.lease == lease, existing.result == nil else {
                return .success(false)
            }
            state.records[record] = nil
            return .success(true)
        }
    }

    // MARK: - Chains

    public func admit(
        _ stages: [StoreStage], cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            let instant = Instant(nanoseconds: t)
            var admission = StoreAdmission(result: .admitted, verdicts: [])
            // Each rate stage's state after this request, written only if every stage admits.
            var spent = [RateLimitState?](repeating: nil, count: stages.count)
            // Every stage decides on the state as it is; nothing changes unless all admit.
            for (index, stage) in stages.enumerated() {
                let key = stage.storeKey
                let verdict: StoreVerdict
                switch stage.limit {
                case .throttle:
                    if let window = state.stageWindows[key], t < window.until {
                        verdict = .throttle(wait: .nanoseconds(window.until - t), windowStart: window.start)
                    } else {
                        verdict = .throttle(wait: nil, windowStart: t)
                    }
                case .rate(let options):
                    var limit = state.limits[key] ?? RateLimitState()
                    verdict = .stage(.rate(limit.check(now: instant, options: options, quantity: cost)))
                    spent[index] = limit
                case .concurrency(let limit, _):
                    let held = state.slots[key, default: [:]].values.count { t < $0 }
                    verdict = .stage(.concurrency(limit: limit, inFlight: held < limit ? held + 1 : held, allowed: held < limit))
                }
                admission.verdicts.append(verdict)
                if verdict.allowed {
                    admission.hold.insert(index)
                } else if stage.shadow {
                    admission.shadowRefusals.append(index)
                } else {
                    admission.result = .refused(stage: index)
                    admission.hold = ChainHold()
                    return .success(admission)
                }
            }
            guard Self.makeRoom(for: stages, holding: admission, in: &state, now: t, capacity: capacity) else {
                return .failure(Self.full)
            }
            for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
                let key = stage.storeKey
                switch stage.limit {
                case .throttle(let interval):
                    state.stageWindows[key] = (t, Self.add(t, interval.nanosecondsClamped))
                case .rate:
                    state.limits[key] = spent[index]
                case .concurrency(_, let lease):
                    var slots = state.slots[key, default: [:]].filter { t < $0.value }
                    slots[owner] = Self.add(t, lease.nanosecondsClamped)
                    state.slots[key] = slots
                }
            }
            return .success(admission)
        }
    }

    /// Drops expired state to make room for the keys that the stages `admission` holds would
    /// add: `false` when a table would still hold more than `capacity` keys.
    private static func makeRoom(
        for stages: [StoreStage], holding admission: StoreAdmission, in state: inout State, now t: Int64, capacity: Int
    ) -> Bool {
        var windows = Set<StoreKey>()
        var limits = Set<StoreKey>()
        var slots = Set<StoreKey>()
        for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
            let key = stage.storeKey
            switch stage.limit {
            case .throttle: if state.stageWindows[key] == nil { windows.insert(key) }
            case .rate: if state.limits[key] == nil { limits.insert(key) }
            case .concurrency: if state.slots[key] == nil { slots.insert(key) }
            }
        }
        if !windows.isEmpty, state.stageWindows.count + windows.count > capacity {
            state.stageWindows = state.stageWindows.filter { t < $0.value.until }
            guard state.stageWindows.count + windows.count <= capacity else { return false }
        }
        if !limits.isEmpty, state.limits.count + limits.count > capacity {
            let instant = Instant(nanoseconds: t)
            state.limits = state.limits.filter { !$0.value.isIdle(at: instant) }
            guard state.limits.count + limits.count <= capacity else { return false }
        }
        if !slots.isEmpty, state.slots.count + slots.count > capacity {
            state.slots = state.slots.filter { $0.value.values.contains { t < $0 } }
            guard state.slots.count + slots.count <= capacity else { return false }
        }
        return true
    }

    public func giveBack(
        _ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
                let key = stage.storeKey
                switch stage.limit {
                case .throttle:
                    if let start = admission.windowStart(of: index), state.stageWindows[key]?.start == start {
                        state.stageWindows[key] = nil
                    }
                case .rate(let options):
                    guard cost > 0, var limit = state.limits[key] else { continue }
                    limit.refund(quantity: cost, now: Instant(nanoseconds: t), options: options)
                    state.limits[key] = limit
                case .concurrency:
                    state.slots[key]?[owner] = nil
                    if state.slots[key]?.isEmpty == true { state.slots[key] = nil }
                }
            }
            return .success(())
        }
    }

    public func renewSlots(
        _ stages: [StoreStage], owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        answer(on: caller, completion) { state, t in
            var held = 0
            for stage in stages {
                guard case .concurrency(_, let lease) = stage.limit, let until = state.slots[stage.storeKey]?[owner] else {
                    continue
                }
                guard t < until else {
                    state.slots[stage.storeKey]?[owner] = nil
                    continue
                }
                state.slots[stage.storeKey]?[owner] = Self.add(t, lease.nanosecondsClamped)
                held += 1
            }
            return .success(held)
        }
    }
}
