import SluiceCore

/// The lease that one execution of this process holds on a shared idempotency record. It is a
/// pure state machine: it takes the store's answers and `now`, and returns what follows. It does
/// no I/O: the lane sends the renewals and arms the timers it names.
///
/// It knows three things about the lease:
/// - the **deadline**: when the lease runs out at the latest, by this process's clock. That is
///   the instant the claim or the last renewal the store accepted was *sent*, plus the lease's
///   length. The store's own clock started no earlier than that.
/// - whether **another owner** took the record (the store refused a renewal);
/// - whether the **last renewal got no answer**. The lease may then run out before the store can
///   be asked again.
///
/// From these it decides when to renew next, when to stop the effect, and whether the effect may
/// commit now (the commit guard). Its fencing token (``StoreLease/fence``) goes unchanged to the
/// effect's record and to the store's writes; only a new claim (``adopt(_:claimSentAt:now:)``)
/// changes it.
struct SharedRecordLease: Hashable, Sendable {
    /// The store's answer to a renewal.
    enum RenewalAnswer: Hashable, Sendable {
        /// The store extended the lease from when it got the renewal.
        case renewed
        /// Another owner claimed the record since.
        case takenByAnotherOwner
        /// The store did not answer (it failed, or was slower than its timeout).
        case noAnswer
    }

    /// What follows a renewal's answer.
    enum Step: Hashable, Sendable {
        /// Send the next renewal at this instant.
        case renew(at: Instant)
        /// Stop the effect if it has not committed, and send no more renewals. The lease stays:
        /// a result is still offered to the store, and the store's fence decides.
        case cancelEffect
        /// The answer is about a lease this execution no longer holds: nothing changes.
        case ignore
    }

    /// The lease: its owner and fencing token.
    private(set) var lease: StoreLease
    /// How long a claim or a renewal holds the record.
    let length: Duration
    /// When the lease runs out at the latest, by this process's clock.
    private(set) var deadline: Instant
    /// The store said another owner holds the record now.
    private(set) var isLost = false
    /// The last renewal got no answer.
    private(set) var isRenewalFailing = false

    /// A lease granted by a claim sent at `claimSentAt`.
    init(_ lease: StoreLease, length: Duration, claimSentAt: Instant) {
        self.lease = lease
        self.length = length
        self.deadline = claimSentAt + length
    }

    /// When to send the next renewal, from `now`. The lane renews every third of the lease. After
    /// a renewal that got no answer, it renews every twelfth (at least 20 ms apart), so that a
    /// passing failure does not let the lease run out.
    func nextRenewal(after now: Instant) -> Instant {
        now + (isRenewalFailing ? max(.milliseconds(20), length / 12) : length / 3)
    }

    /// The store answered a renewal of `renewed`, sent at `sentAt`. Returns what follows.
    mutating func answered(_ answer: RenewalAnswer, renewing renewed: StoreLease, sentAt: Instant, now: Instant) -> Step {
        guard renewed == lease, !isLost else { return .ignore }
        switch answer {
        case .renewed:
            // The store's clock started the new lease no earlier than the renewal left.
            deadline = max(deadline, sentAt + length)
            isRenewalFailing = false
            return .renew(at: nextRenewal(after: now))
        case .takenByAnotherOwner:
            isLost = true
            return .cancelEffect
        case .noAnswer:
            isRenewalFailing = true
            return .renew(at: nextRenewal(after: now))
        }
    }

    /// Another claim by this process, sent at `claimSentAt`, took the record again while the
    /// execution still ran. The lease had run out, because the store was unreachable for longer
    /// than the lease. The execution adopts the new lease and its fence: renewals start over from
    /// it, and answers about the old lease are ignored. Returns when to renew next.
    mutating func adopt(_ lease: StoreLease, claimSentAt: Instant, now: Instant) -> Instant {
        self.lease = lease
        deadline = claimSentAt + length
        isLost = false
        isRenewalFailing = false
        return nextRenewal(after: now)
    }

    /// Whether an effect may start under this lease at `now`: more than two thirds of it are
    /// left, so that its first renewal (a third of the lease later) is sent while the commit
    /// guard would still let it commit. A lease granted by an answer that came late, or held
    /// while more of the request was decided (its limit chain, at the store), may start nothing.
    func mayStart(now: Instant) -> Bool {
        !isLost && deadline - now > length - length / 3
    }

    /// Why the execution may not commit at `now`, or `nil` when it may. It may not commit when:
    /// - the store said another owner took the record;
    /// - the lease cannot be renewed now (`storeReachable` is false, or the last renewal got no
    ///   answer), so it may run out before the effect's change lands, and another instance could
    ///   then take the record over;
    /// - less than a third of the lease is left by this process's clock (the process was paused).
    func commitRefusal(now: Instant, storeReachable: Bool, storeAddress: String, execution: EventToken) -> CommitRefusal? {
        if isLost {
            return CommitRefusal(code: .leaseLost, message: "another owner holds the record now", value: "\(execution.rawValue)")
        }
        if !storeReachable || isRenewalFailing {
            return CommitRefusal(
                code: .leaseNotSafe, message: "the store cannot be reached, so the lease cannot be renewed", value: storeAddress)
        }
        let left = deadline - now
        guard left > length / 3 else {
            return CommitRefusal(
                code: .leaseNotSafe, message: "less than a third of the lease is left by this process's clock", value: "\(left)")
        }
        return nil
    }
}
