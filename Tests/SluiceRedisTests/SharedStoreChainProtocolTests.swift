import Sluice
import SluiceCore
@testable import SluiceRedis
import SluiceTestSupport
import Testing

/// Chains decided by the store, held by both implementations: all or nothing in one step, step
/// by step (with the same rollback) when the stages are in different places (Redis hash slots),
/// throttle windows closed and slots freed when given back, slots renewed by their owner only.
@Suite(.serialized, .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed"))
struct SharedStoreChainProtocolTests {
    typealias Kind = SharedStoreProtocolTests.Kind
    typealias Fixture = SharedStoreProtocolTests.Fixture

    private static let minute = Duration.seconds(60)

    private static func rate(_ key: String, limit: Int) throws -> StoreStage {
        StoreStage(scope: "pay/pay-rate", key: key, limit: .rate(try RateLimitOptions(count: 1, per: minute, burst: limit - 1)))
    }

    private static func slots(_ key: String, limit: Int, shadow: Bool = false) -> StoreStage {
        StoreStage(scope: "pay/pay-slots", key: key, limit: .concurrency(limit: limit, lease: minute), shadow: shadow)
    }

    private func admit(_ fixture: Fixture, _ stages: [StoreStage], owner: String, cost: Int = 1) async throws -> StoreAdmission {
        try await fixture.call { loop, done in fixture.store.admitChain(stages, cost: cost, owner: owner, on: loop, done) }.get()
    }

    private func giveBack(_ fixture: Fixture, _ stages: [StoreStage], _ admission: StoreAdmission, owner: String, cost: Int = 1)
        async throws
    {
        try await fixture.call { loop, done in
            fixture.store.giveBack(stages, admission: admission, cost: cost, owner: owner, on: loop, done)
        }.get()
    }

    private func remaining(_ admission: StoreAdmission, _ stage: Int = 0) -> Int? {
        guard stage < admission.verdicts.count, case .stage(.rate(let decision)) = admission.verdicts[stage] else { return nil }
        return decision.remaining
    }

    @Test(arguments: Kind.allCases) func aChainInOnePlaceIsDecidedAllOrNothing(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let account = "acct-\(kind)"
        let chain = [try Self.rate(account, limit: 2), Self.slots(account, limit: 1)]
        #expect(fixture.store.place(of: chain[0]) == fixture.store.place(of: chain[1]))
        let first = try await admit(fixture, chain, owner: "o1")
        #expect(first.result == .admitted && remaining(first) == 1)
        #expect(first.verdicts[1] == .stage(.concurrency(limit: 1, inFlight: 1, allowed: true)))
        // The slot is taken: the rate stage, which admitted, spends nothing.
        let second = try await admit(fixture, chain, owner: "o2")
        #expect(second.result == .refused(stage: 1) && second.hold.isEmpty)
        // The first's effect ended: its slot (only) is given back.
        var slotOnly = first
        slotOnly.hold = ChainHold()
        slotOnly.hold.insert(1)
        try await giveBack(fixture, chain, slotOnly, owner: "o1", cost: 0)
        let third = try await admit(fixture, chain, owner: "o3")
        #expect(third.result == .admitted && remaining(third) == 0)
        if let redis = fixture.redis {
            #expect(try await SharedStoreProtocolTests.pttl(redis, "sluice:{\(account)}:pay/pay-rate:g") > 0)
            #expect(try await SharedStoreProtocolTests.pttl(redis, "sluice:{\(account)}:pay/pay-slots:c") > 0)
        }
    }

    @Test(arguments: Kind.allCases) func aChainAcrossPlacesGivesBackWhatItsEarlierStepsTook(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let chain = [try Self.rate("acct-\(kind)", limit: 2), Self.slots("everyone-\(kind)", limit: 1)]
        if kind == .redis { #expect(fixture.store.place(of: chain[0]) != fixture.store.place(of: chain[1])) }
        #expect(try await admit(fixture, chain, owner: "o1").result == .admitted)
        // o2's rate step admits, its slot step refuses: the rate it spent goes back.
        let refused = try await admit(fixture, chain, owner: "o2")
        #expect(refused.result == .refused(stage: 1))
        #expect(remaining(refused) == 0)
        try await giveBack(fixture, [chain[1]], StoreAdmission(result: .admitted, verdicts: [], hold: Self.hold([0])), owner: "o1")
        let third = try await admit(fixture, chain, owner: "o3")
        #expect(third.result == .admitted && remaining(third) == 0)
    }

    @Test(arguments: Kind.allCases) func aThrottleWindowGivenBackIsClosedAndCostIsSubtracted(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let throttle = StoreStage(scope: "tap", key: "k-\(kind)", limit: .throttle(interval: Self.minute))
        let start = ContinuousClock.now
        let opened = try await admit(fixture, [throttle], owner: "o1")
        #expect(opened.result == .admitted)
        let closed = try await admit(fixture, [throttle], owner: "o2")
        let elapsed = ContinuousClock.now - start
        guard closed.result == .refused(stage: 0), case .throttle(let wait?, _) = closed.verdicts[0] else {
            Issue.record("an open window refuses: \(closed)")
            return
        }
        // A minute less what passed between the two calls on the deciding clock (Redis's own,
        // rounded to the millisecond; the memory store's manual clock stands still).
        #expect(wait >= Self.minute - elapsed - .milliseconds(1) && wait <= Self.minute, "\(wait) after \(elapsed)")
        // Giving back the refused answer changes nothing; giving back the window closes it.
        try await giveBack(fixture, [throttle], closed, owner: "o2")
        #expect(try await admit(fixture, [throttle], owner: "o3").result == .refused(stage: 0))
        try await giveBack(fixture, [throttle], opened, owner: "o1")
        #expect(try await admit(fixture, [throttle], owner: "o4").result == .admitted)
        // A rate's cost comes back by subtraction.
        let rate = try Self.rate("r-\(kind)", limit: 5)
        let spent = try await admit(fixture, [rate], owner: "o5", cost: 3)
        #expect(remaining(spent) == 2)
        try await giveBack(fixture, [rate], spent, owner: "o5", cost: 2)
        #expect(remaining(try await admit(fixture, [rate], owner: "o6", cost: 1)) == 3)
    }

    @Test(arguments: Kind.allCases) func slotsAreRenewedByTheirOwnerAndShadowStagesTakeNothing(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let shadow = Self.slots("s-\(kind)", limit: 1, shadow: true)
        let first = try await admit(fixture, [shadow], owner: "o1")
        #expect(first.result == .admitted && first.shadowRefusals.isEmpty && first.hold == Self.hold([0]))
        let second = try await admit(fixture, [shadow], owner: "o2")
        #expect(second.result == .admitted && second.shadowRefusals == [0] && second.hold.isEmpty)
        let renewals = { (owner: String) in
            try await fixture.call { loop, done in fixture.store.renewSlots([shadow], owner: owner, on: loop, done) }.get()
        }
        #expect(try await renewals("o1") == 1)
        #expect(try await renewals("o2") == 0)
    }

    static func hold(_ stages: [Int]) -> ChainHold {
        var hold = ChainHold()
        for stage in stages { hold.insert(stage) }
        return hold
    }
}
