import SluiceCore

/// One request's claim of a shared idempotency record, as a pure state machine. It starts with
/// the first claim. When another owner runs the record, it polls the store, with backoff, for up
/// to one lease. Each answer from the store becomes a ``Step`` for the lane to carry out. It
/// does no I/O and reads no clock: the lane passes `now`, and a random number generator for the
/// polls' jitter.
struct SharedRecordClaim: Hashable, Sendable {
    /// What a claim's answer leads to.
    enum Step: Hashable, Sendable {
        /// The record is this request's now: the limits decide, then it runs under the lease.
        case run(StoreLease)
        /// The record holds a result: replay it.
        case replay([UInt8])
        /// The record was opened with another payload (the fingerprint given here).
        case mismatch(storedFingerprint: String)
        /// Another owner runs it, and this request does not wait for it (the plugin rejects
        /// concurrent duplicates), or it has waited a whole lease: refuse rather than guess.
        case conflict
        /// Another owner runs it: ask again at the given instant, as the claim given here.
        case poll(SharedRecordClaim, at: Instant)
        /// The store did not answer, so the claim may have landed. Whatever happens next, the
        /// lane gives the record back, by owner. Then, when `decideLocally` is true, this
        /// process decides alone under its own table. Otherwise it answers `unavailable`.
        case failed(decideLocally: Bool)
    }

    /// The polls made so far (0 for the first claim).
    let attempt: Int
    /// Until when the request waits for another owner's result. The first "running" answer
    /// sets it, one lease from then.
    let deadline: Instant?

    /// The first claim of a request.
    static var first: SharedRecordClaim { SharedRecordClaim(attempt: 0, deadline: nil) }

    /// A claim that waits for another owner's result until `deadline`, as the callers of an
    /// execution that lost its lease do.
    static func awaiting(until deadline: Instant) -> SharedRecordClaim {
        SharedRecordClaim(attempt: 1, deadline: deadline)
    }

    /// What follows the store's answer to this claim (`nil`: the store did not answer).
    /// - Parameters:
    ///   - joins: whether the request waits for a duplicate that another owner runs, rather than
    ///     being refused at once.
    ///   - lease: the plugin's lease, which is also the longest wait for another owner.
    ///   - failureMode: what the plugin does when its store does not answer.
    func step(
        after answer: StoreClaim?, joins: Bool, lease: Duration, failureMode: StoreFailureMode, now: Instant,
        using generator: inout some RandomNumberGenerator
    ) -> Step {
        switch answer {
        case .claimed(let granted):
            return .run(granted)
        case .completed(let bytes):
            return .replay(bytes)
        case .mismatch(let stored):
            return .mismatch(storedFingerprint: stored)
        case .running:
            guard joins else { return .conflict }
            let until = deadline ?? now + lease
            guard now < until else { return .conflict }
            let next = SharedRecordClaim(attempt: attempt + 1, deadline: until)
            return .poll(next, at: now + next.pollDelay(using: &generator))
        case nil:
            // A payment never fails open, and never runs alone once the store has said that
            // another owner runs it (the deadline is set by the first "running").
            return .failed(decideLocally: failureMode == .local && deadline == nil)
        }
    }

    /// How long to wait before this poll: 20 ms, doubling to 500 ms, with ±50 % jitter so that
    /// the duplicates of a record do not ask all at once.
    func pollDelay(using generator: inout some RandomNumberGenerator) -> Duration {
        let base = min(500, 20 << min(max(attempt, 1) - 1, 5))
        return .milliseconds(Int.random(in: base / 2...base + base / 2, using: &generator))
    }
}
