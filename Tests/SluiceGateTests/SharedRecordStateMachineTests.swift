import PropertyBased
@testable import Sluice
import SluiceCore
import Testing

/// The shared-store protocol's state machines, without a loop, a socket or a store: the lease an
/// execution holds (renewals, the commit guard, a takeover), a request's claim (replays, polls,
/// refusals, failures) and what an ended execution does with its record.
@Suite struct SharedRecordStateMachineTests {
    static let lease = StoreLease(owner: "a-0-1", fence: FencingToken(epoch: 7, counter: 1))
    static let length = Duration.seconds(30)

    static func at(_ milliseconds: Int64) -> Instant { Instant(milliseconds: milliseconds) }

    // MARK: - The lease

    @Test func aClaimedLeaseRunsOutALeaseAfterItsClaimLeftAndRenewsEveryThird() {
        let held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(1_000))
        #expect(held.deadline == Self.at(31_000))
        #expect(held.nextRenewal(after: Self.at(1_200)) == Self.at(11_200))
        #expect(held.commitRefusal(now: Self.at(1_200), storeReachable: true, storeAddress: "s", execution: EventToken(1)) == nil)
    }

    @Test func anEffectStartsOnlyWhileMoreThanTwoThirdsOfTheLeaseAreLeft() {
        // Claimed at 1 s with a 30 s lease: the first renewal, a third of the lease after the
        // start, must leave while the commit guard still lets the effect commit.
        let held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(1_000))
        #expect(held.mayStart(now: Self.at(1_000)))
        #expect(held.mayStart(now: Self.at(10_999)))
        #expect(!held.mayStart(now: Self.at(11_000)))
        #expect(!held.mayStart(now: Self.at(40_000)))
    }

    @Test func aRenewalExtendsTheLeaseFromWhenItWasSentNeverShortensIt() {
        var held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(0))
        #expect(held.answered(.renewed, renewing: Self.lease, sentAt: Self.at(10_000), now: Self.at(12_000)) == .renew(at: Self.at(22_000)))
        // Counted from when it left (10 s), not from when its answer came (12 s).
        #expect(held.deadline == Self.at(40_000))
        // An older renewal answered late leaves the later deadline.
        #expect(held.answered(.renewed, renewing: Self.lease, sentAt: Self.at(5_000), now: Self.at(13_000)) == .renew(at: Self.at(23_000)))
        #expect(held.deadline == Self.at(40_000))
    }

    @Test func aRenewalWithNoAnswerRenewsSoonerAndForbidsCommittingUntilOneIsAccepted() {
        var held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(0))
        #expect(held.answered(.noAnswer, renewing: Self.lease, sentAt: Self.at(10_000), now: Self.at(10_500)) == .renew(at: Self.at(13_000)))
        #expect(held.isRenewalFailing)
        let refusal = held.commitRefusal(now: Self.at(10_600), storeReachable: true, storeAddress: "redis:6379", execution: EventToken(1))
        #expect(refusal?.code == .leaseNotSafe)
        #expect(refusal?.value == "redis:6379")
        #expect(held.answered(.renewed, renewing: Self.lease, sentAt: Self.at(13_000), now: Self.at(13_100)) == .renew(at: Self.at(23_100)))
        #expect(held.commitRefusal(now: Self.at(13_200), storeReachable: true, storeAddress: "s", execution: EventToken(1)) == nil)
    }

    @Test func aShortLeaseRetriesAFailedRenewalNoSoonerThanTwentyMilliseconds() {
        var held = SharedRecordLease(Self.lease, length: .milliseconds(120), claimSentAt: Self.at(0))
        #expect(held.answered(.noAnswer, renewing: Self.lease, sentAt: Self.at(40), now: Self.at(41)) == .renew(at: Self.at(61)))
    }

    @Test func aLeaseTakenByAnotherOwnerCancelsTheEffectAndThenIgnoresEveryAnswer() {
        var held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(0))
        #expect(held.answered(.takenByAnotherOwner, renewing: Self.lease, sentAt: Self.at(10_000), now: Self.at(10_001)) == .cancelEffect)
        #expect(held.commitRefusal(now: Self.at(10_002), storeReachable: true, storeAddress: "s", execution: EventToken(9))?.code == .leaseLost)
        #expect(held.answered(.renewed, renewing: Self.lease, sentAt: Self.at(10_000), now: Self.at(10_003)) == .ignore)
        #expect(held.isLost)
    }

    @Test func theCommitGuardRefusesAnUnreachableStoreAndTheLastThirdOfTheLease() {
        let held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(0))
        let rows: [(now: Int64, reachable: Bool, refused: CommitRefusal.Code?)] = [
            (0, true, nil),
            (19_999, true, nil),
            (20_000, true, .leaseNotSafe),  // exactly a third left
            (25_000, true, .leaseNotSafe),
            (31_000, true, .leaseNotSafe),  // ran out: a paused process
            (1_000, false, .leaseNotSafe),
        ]
        for row in rows {
            let refusal = held.commitRefusal(now: Self.at(row.now), storeReachable: row.reachable, storeAddress: "s", execution: EventToken(1))
            #expect(refusal?.code == row.refused, "at \(row.now) ms, reachable \(row.reachable)")
        }
    }

    @Test func aTakeoverByThisProcessAdoptsTheNewFenceAndIgnoresTheOldLeasesAnswers() {
        var held = SharedRecordLease(Self.lease, length: Self.length, claimSentAt: Self.at(0))
        _ = held.answered(.takenByAnotherOwner, renewing: Self.lease, sentAt: Self.at(10_000), now: Self.at(10_001))
        let newer = StoreLease(owner: "a-0-9", fence: FencingToken(epoch: 7, counter: 2))
        #expect(held.adopt(newer, claimSentAt: Self.at(40_000), now: Self.at(40_010)) == Self.at(50_010))
        #expect(held.lease.fence > Self.lease.fence)
        #expect(held.deadline == Self.at(70_000))
        #expect(!held.isLost)
        #expect(held.answered(.takenByAnotherOwner, renewing: Self.lease, sentAt: Self.at(39_000), now: Self.at(40_020)) == .ignore)
        #expect(held.commitRefusal(now: Self.at(40_020), storeReachable: true, storeAddress: "s", execution: EventToken(1)) == nil)
    }

    /// Random renewals, answers (in any order, some lost), takeovers and commit checks, against a
    /// naive model that keeps every answer. Also a safety check independent of the model: a
    /// commit allowed at `now` has more than a third of the lease left on the *store's* clock,
    /// wherever between its sending and its answer the store took each renewal.
    @Test func theLeaseMatchesANaiveModelAndNeverAllowsACommitTheStoreCouldOutlive() async {
        // (event kind, gap in ms, pick)
        let events = zip(Gen.int(in: 0...5), Gen.int(in: 0...6_000), Gen.int(in: 0...11)).array(of: 1...80)
        await propertyCheck(count: 400, input: Gen.int(in: 3...60), events) { seconds, events in
            let length = Duration.seconds(seconds)
            let lengthMs = Int64(seconds) * 1_000
            var t: Int64 = 0
            var fence: UInt32 = 1
            var current = StoreLease(owner: "o1", fence: FencingToken(epoch: 1, counter: fence))
            var held = SharedRecordLease(current, length: length, claimSentAt: Self.at(t))
            // The model: every renewal sent and not yet answered, every answer kept.
            var inFlight: [(lease: StoreLease, sentAt: Int64)] = []
            var deadline = lengthMs
            var lost = false
            var failing = false
            // When the store's own lease ends: the latest instant at which the store took a
            // claim or a renewal of the current lease, plus its length.
            var storeExpiry = lengthMs
            for (kind, gap, pick) in events {
                t += Int64(gap)
                let now = Self.at(t)
                switch kind {
                case 0, 1:
                    inFlight.append((current, t))
                case 2 where !inFlight.isEmpty:
                    // Answers come in any order.
                    let renewal = inFlight.remove(at: pick % inFlight.count)
                    let answer: SharedRecordLease.RenewalAnswer = [.renewed, .renewed, .noAnswer, .takenByAnotherOwner][pick % 4]
                    let step = held.answered(answer, renewing: renewal.lease, sentAt: Self.at(renewal.sentAt), now: now)
                    guard renewal.lease == current, !lost else {
                        #expect(step == .ignore)
                        continue
                    }
                    switch answer {
                    case .renewed:
                        deadline = max(deadline, renewal.sentAt + lengthMs)
                        failing = false
                        // The store took it somewhere between its sending and now.
                        let took = renewal.sentAt + Int64(pick) * (t - renewal.sentAt) / 11
                        storeExpiry = max(storeExpiry, took + lengthMs)
                        #expect(step == .renew(at: now + length / 3))
                    case .noAnswer:
                        failing = true
                        #expect(step == .renew(at: now + max(.milliseconds(20), length / 12)))
                    case .takenByAnotherOwner:
                        lost = true
                        #expect(step == .cancelEffect)
                    }
                case 3 where pick == 0:
                    // This process claims the record again (its lease had run out), sent a
                    // little before now.
                    fence += 1
                    current = StoreLease(owner: "o\(fence)", fence: FencingToken(epoch: 1, counter: fence))
                    let sentAt = t - Int64(gap / 2)
                    _ = held.adopt(current, claimSentAt: Self.at(sentAt), now: now)
                    deadline = sentAt + lengthMs
                    storeExpiry = sentAt + lengthMs + Int64(gap / 4)
                    lost = false
                    failing = false
                default:
                    let reachable = pick % 5 != 0
                    let refusal = held.commitRefusal(now: now, storeReachable: reachable, storeAddress: "s", execution: EventToken(1))
                    let allowed = !lost && reachable && !failing && deadline - t > lengthMs / 3
                    #expect((refusal == nil) == allowed, "at \(t) ms: lost \(lost), failing \(failing), deadline \(deadline)")
                    if refusal == nil { #expect(storeExpiry - t > lengthMs / 3, "the store's lease could end first") }
                }
                #expect(held.deadline == Self.at(deadline))
                #expect(held.isLost == lost)
                #expect(held.isRenewalFailing == failing)
                #expect(held.lease == current)
            }
        }
    }

    // MARK: - The claim

    @Test func eachStoreAnswerToAFirstClaimLeadsToItsStep() {
        var generator = SplitMix64(seed: 1)
        let now = Self.at(5_000)
        let rows: [(answer: StoreClaim?, joins: Bool, mode: StoreFailureMode, step: SharedRecordClaim.Step)] = [
            (.claimed(Self.lease), true, .closed, .run(Self.lease)),
            (.completed([1, 2]), true, .closed, .replay([1, 2])),
            (.mismatch(storedFingerprint: "f"), true, .closed, .mismatch(storedFingerprint: "f")),
            (.running, false, .closed, .conflict),
            (nil, true, .local, .failed(decideLocally: true)),
            (nil, true, .closed, .failed(decideLocally: false)),
            // A payment never fails open.
            (nil, true, .open, .failed(decideLocally: false)),
        ]
        for row in rows {
            let step = SharedRecordClaim.first.step(
                after: row.answer, joins: row.joins, lease: Self.length, failureMode: row.mode, now: now, using: &generator)
            #expect(step == row.step, "\(String(describing: row.answer)), joins \(row.joins), \(row.mode)")
        }
    }

    @Test func aDuplicateOfARunningRecordPollsWithBackoffForALeaseThenIsRefused() {
        var generator = SplitMix64(seed: 42)
        let lease = Duration.seconds(3)
        var claim = SharedRecordClaim.first
        var now = Self.at(0)
        var polls = 0
        var delays: [Duration] = []
        while true {
            let step = claim.step(after: .running, joins: true, lease: lease, failureMode: .local, now: now, using: &generator)
            guard case .poll(let next, let at) = step else {
                #expect(step == .conflict)
                break
            }
            #expect(next.deadline == Self.at(3_000), "the wait is one lease from the first answer")
            #expect(next.attempt == claim.attempt + 1)
            let base = min(500, 20 << min(next.attempt - 1, 5))
            #expect(at - now >= .milliseconds(base / 2) && at - now <= .milliseconds(base + base / 2))
            delays.append(at - now)
            claim = next
            now = at
            polls += 1
        }
        #expect(now >= Self.at(3_000) && now < Self.at(3_750), "refused once the lease has passed")
        #expect(polls > 5 && delays.allSatisfy { $0 <= .milliseconds(750) })
        // Once it has waited, a store that stops answering is not a reason to run it alone.
        let failed = claim.step(after: nil, joins: true, lease: lease, failureMode: .local, now: now, using: &generator)
        #expect(failed == .failed(decideLocally: false))
    }

    @Test func callersOfALostLeaseWaitForTheRecordAndNeverRunItAlone() {
        var generator = SplitMix64(seed: 3)
        let claim = SharedRecordClaim.awaiting(until: Self.at(30_000))
        let step = claim.step(after: .running, joins: true, lease: Self.length, failureMode: .local, now: Self.at(1_000), using: &generator)
        guard case .poll(let next, _) = step else {
            Issue.record("expected a poll, got \(step)")
            return
        }
        #expect(next.deadline == Self.at(30_000))
        #expect(claim.step(after: nil, joins: true, lease: Self.length, failureMode: .local, now: Self.at(1_000), using: &generator)
            == .failed(decideLocally: false))
        // The record turned out free: it runs under a new lease.
        #expect(claim.step(after: .claimed(Self.lease), joins: true, lease: Self.length, failureMode: .local, now: Self.at(1_000), using: &generator)
            == .run(Self.lease))
    }

    // MARK: - The end of an execution

    @Test func anEndedExecutionStoresWhatRanAndGivesBackWhatChangedNothing() {
        typealias Row = (failed: Bool, failureOutput: Bool, cancelled: Bool, committedNothing: Bool, cacheErrors: Bool, ending: SharedRecordEnding)
        let rows: [Row] = [
            (false, false, false, false, false, .write),
            (false, false, true, false, false, .write),  // it ended with an output all the same
            (false, true, false, false, false, .release(refundsQuota: true)),
            (false, true, false, false, true, .write),
            (true, false, false, false, true, .write),
            (true, false, false, false, false, .release(refundsQuota: true)),
            (true, false, true, false, true, .release(refundsQuota: false)),
            (true, false, false, true, true, .release(refundsQuota: false)),
            (true, false, true, true, false, .release(refundsQuota: false)),
        ]
        for row in rows {
            let ending = SharedRecordEnding.of(
                failed: row.failed, failureOutput: row.failureOutput, cancelled: row.cancelled,
                committedNothing: row.committedNothing, cacheErrors: row.cacheErrors)
            #expect(ending == row.ending, "\(row)")
        }
    }

    @Test func writesAndReleasesAreRetriedWithBackoffAndReleasesGiveUp() {
        let delays = (0...8).map { SharedRecordEnding.retryDelay(after: $0) }
        #expect(delays == [50, 100, 200, 400, 800, 1_600, 2_000, 2_000, 2_000].map { Duration.milliseconds($0) })
        #expect(SharedRecordEnding.releaseAttempts == 6)
    }
}
