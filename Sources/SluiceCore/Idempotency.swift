/// What an idempotency guard decides about a request.
public enum IdempotencyDecision<Result> {
    /// Execute: the request now owns the record (lease until `now + lease`). `takeover` names the
    /// previous owner whose lease ran out (it is presumed dead; its late completion is ignored).
    case execute(takeover: EventToken?)
    /// The same request is running: wait for the owner's result and share it.
    case join(owner: EventToken)
    /// The same request is running and the options say reject (HTTP 409 Conflict).
    case conflict
    /// The request already completed: reply with the stored result, marked as a replay.
    case replay(Result)
    /// The key was used with a different payload (HTTP 422 Unprocessable Content).
    case mismatch
}

extension IdempotencyDecision: Sendable where Result: Sendable {}
extension IdempotencyDecision: Equatable where Result: Equatable {}
extension IdempotencyDecision: Hashable where Result: Hashable {}

/// What happened to a completion reported to an idempotency guard.
public enum IdempotencyCompletion: Hashable, Sendable {
    /// The result is stored and will be replayed until the retention ends.
    case stored
    /// The record was released (an uncached error): the next request executes again.
    case released
    /// The reporter no longer owns the record (its lease was taken over, or it was released):
    /// nothing changed.
    case notOwner
}

/// How long a new owner holds an idempotency record before another request may take it over.
public enum IdempotencyLease: Hashable, Sendable {
    /// For `options.lease`, renewed while the owner works (``IdempotencyRecord/renewLease(owner:now:options:)``):
    /// for owners that may die without releasing the record (another process sharing a store).
    case renewable
    /// Until the owner completes or releases it: for an owner running in this process, whose
    /// execution always ends in a completion or a release. However long it runs, it is never
    /// taken over, and its record is never expired or swept while it runs.
    case untilReleased
}

/// The record for one idempotency key: absent → in flight → completed → expired.
///
/// Semantics: same key and fingerprint while in flight → join (or reject: 409);
/// completed → replay the stored result; a different fingerprint → mismatch (422); a lease that
/// ran out may be taken over; a cancelled execution releases the record; an error result is stored
/// and replayed (`cacheErrors`) or releases the record.
public enum IdempotencyRecord<Fingerprint: Hashable, Result> {
    /// No record (never used, released, or expired).
    case absent
    /// An execution owns the record until `leaseEnd` (nanoseconds).
    case inFlight(fingerprint: Fingerprint, owner: EventToken, leaseEnd: Int64)
    /// The execution finished; the result is replayed until `expiresAt` (nanoseconds).
    case completed(fingerprint: Fingerprint, result: Result, expiresAt: Int64)

    /// Decides what a request with `fingerprint`, identified by `token`, gets at `now`; a request
    /// that executes owns the record under `lease`. A duplicate while the record is in flight is
    /// joined or refused as `concurrent` says (`options.concurrent` when `nil`).
    @inlinable
    public mutating func begin(
        fingerprint: Fingerprint,
        token: EventToken,
        now: Instant,
        options: IdempotencyOptions,
        lease: IdempotencyLease = .renewable,
        concurrent: IdempotencyOptions.Concurrent? = nil
    ) -> IdempotencyDecision<Result> {
        let t = now.nanoseconds
        let ownedUntil = lease == .untilReleased ? Int64.max : t.saturatingAdd(options.leaseNanos)
        switch self {
        case .absent:
            break
        case .inFlight(let stored, let owner, let leaseEnd):
            if t >= leaseEnd {
                // The owner is presumed dead: its record no longer protects anything, whatever the
                // new request's fingerprint.
                self = .inFlight(fingerprint: fingerprint, owner: token, leaseEnd: ownedUntil)
                return .execute(takeover: owner)
            }
            guard stored == fingerprint else { return .mismatch }
            switch concurrent ?? options.concurrent {
            case .join: return .join(owner: owner)
            case .reject: return .conflict
            }
        case .completed(let stored, let result, let expiresAt):
            if t < expiresAt {
                return stored == fingerprint ? .replay(result) : .mismatch
            }
        }
        self = .inFlight(fingerprint: fingerprint, owner: token, leaseEnd: ownedUntil)
        return .execute(takeover: nil)
    }

    /// Reports the owner's result. `isError` results are stored only if `options.cacheErrors`.
    @inlinable
    public mutating func complete(
        owner: EventToken,
        result: Result,
        isError: Bool,
        now: Instant,
        options: IdempotencyOptions
    ) -> IdempotencyCompletion {
        guard case .inFlight(let fingerprint, let current, _) = self, current == owner else {
            return .notOwner
        }
        if isError && !options.cacheErrors {
            self = .absent
            return .released
        }
        self = .completed(
            fingerprint: fingerprint,
            result: result,
            expiresAt: now.nanoseconds.saturatingAdd(options.retentionNanos)
        )
        return .stored
    }

    /// The owner's execution was cancelled: release the record so a retry executes.
    ///
    /// - Returns: whether the record was released (false if `owner` does not own it).
    @inlinable
    public mutating func cancel(owner: EventToken) -> Bool {
        guard case .inFlight(_, let current, _) = self, current == owner else { return false }
        self = .absent
        return true
    }

    /// Extends the owner's lease to `now + lease` (for executions that outlive one lease); never
    /// shortens it.
    ///
    /// - Returns: whether `owner` still owns the record.
    @inlinable
    public mutating func renewLease(owner: EventToken, now: Instant, options: IdempotencyOptions) -> Bool {
        guard case .inFlight(let fingerprint, let current, let leaseEnd) = self, current == owner else { return false }
        // Renewing never shortens a lease (one held until release stays so).
        let renewed = Swift.max(leaseEnd, now.nanoseconds.saturatingAdd(options.leaseNanos))
        self = .inFlight(fingerprint: fingerprint, owner: owner, leaseEnd: renewed)
        return true
    }
}

extension IdempotencyRecord: KeyedState {
    /// Absent, a lease that ran out, or a completed record past its retention.
    @inlinable
    public func isIdle(at now: Instant) -> Bool {
        switch self {
        case .absent: true
        case .inFlight(_, _, let leaseEnd): now.nanoseconds >= leaseEnd
        case .completed(_, _, let expiresAt): now.nanoseconds >= expiresAt
        }
    }
}

extension IdempotencyRecord: Sendable where Fingerprint: Sendable, Result: Sendable {}
extension IdempotencyRecord: Equatable where Result: Equatable {}

/// Idempotency records for many keys in a budgeted ``KeyTable`` that refuses new keys when full
/// (evicting a record could let a payment run twice).
public struct IdempotencyTable<Key: Hashable, Fingerprint: Hashable, Result> {
    /// The options every decision uses.
    public let options: IdempotencyOptions
    /// The records.
    public var table: KeyTable<Key, IdempotencyRecord<Fingerprint, Result>>

    /// An empty table within `budget`.
    public init(options: IdempotencyOptions, budget: MemoryBudget) throws(SluiceError) {
        self.options = options
        self.table = try KeyTable(budget: budget, whenFull: .refuse)
    }

    /// Decides what a request for `key` with `fingerprint`, identified by `token`, gets at `now`.
    ///
    /// A request that executes owns the record under `lease`; a duplicate while it is in flight is
    /// joined or refused as `concurrent` says (the options' choice when `nil`).
    ///
    /// - Throws: ``SluiceError/Code/tableBusy`` when a new key arrives and the table is full of live
    ///   records.
    @inlinable
    public mutating func begin(
        key: Key,
        fingerprint: Fingerprint,
        token: EventToken,
        now: Instant,
        lease: IdempotencyLease = .renewable,
        concurrent: IdempotencyOptions.Concurrent? = nil
    ) throws(SluiceError) -> IdempotencyDecision<Result> {
        if let index = table.index(of: key) {
            table.touch(index)
            return table[index].begin(
                fingerprint: fingerprint, token: token, now: now, options: options, lease: lease, concurrent: concurrent)
        }
        var record = IdempotencyRecord<Fingerprint, Result>.absent
        let decision = record.begin(fingerprint: fingerprint, token: token, now: now, options: options, lease: lease)
        _ = try table.insert(key, record, now: now)
        return decision
    }

    /// Reports the owner's result (see ``IdempotencyRecord/complete(owner:result:isError:now:options:)``).
    @inlinable
    public mutating func complete(
        key: Key,
        owner: EventToken,
        result: Result,
        isError: Bool = false,
        now: Instant
    ) -> IdempotencyCompletion {
        guard let index = table.index(of: key) else { return .notOwner }
        table.touch(index)
        let outcome = table[index].complete(owner: owner, result: result, isError: isError, now: now, options: options)
        if outcome == .released { table.remove(at: index) }
        return outcome
    }

    /// The owner's execution was cancelled: release the record.
    @inlinable
    @discardableResult
    public mutating func cancel(key: Key, owner: EventToken) -> Bool {
        guard let index = table.index(of: key) else { return false }
        guard table[index].cancel(owner: owner) else { return false }
        table.remove(at: index)
        return true
    }

    /// Extends the owner's lease.
    @inlinable
    public mutating func renewLease(key: Key, owner: EventToken, now: Instant) -> Bool {
        guard let index = table.index(of: key) else { return false }
        return table[index].renewLease(owner: owner, now: now, options: options)
    }

    /// Drops up to `maxEntries` examined records that expired (see ``KeyTable/sweep(now:maxEntries:)``).
    @inlinable
    @discardableResult
    public mutating func sweep(now: Instant, maxEntries: Int) -> Int {
        table.sweep(now: now, maxEntries: maxEntries)
    }
}
