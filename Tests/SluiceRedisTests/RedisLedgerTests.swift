import Sluice
import SluiceLibevent
import SluicePayment
import SluicePaymentRedisLedger
import SluiceRedis
import SluiceTestSupport
import Testing

/// The processor's ledger in Redis (a `redis-server` this suite starts), held to what
/// `MemoryChargeLedger` does: one charge per record, the charge returned to a newer fence, a
/// stale fence refused, and no answer when Redis is gone.
@Suite(.serialized, .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed"))
struct RedisLedgerTests {
    @Test func chargesOnceReturnsTheChargeAndRefusesAStaleFence() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "ledger-test")
        defer { group.shutdownGracefully() }
        // A timeout no stall of a loaded machine reaches: every call but the last is answered.
        let ledger = RedisChargeLedger(
            endpoint: try RedisEndpoint(url: redis.url()), group: group, retention: .seconds(60), timeout: .seconds(10))
        ledger.start()
        let loop = group.loops[0]
        // The 64-bit fences of two epochs: compared exactly (as text), not as Lua's doubles,
        // which cannot tell these two apart.
        let older = FencingToken(value: (1 << 62) + 1)
        let newer = FencingToken(value: (1 << 62) + 2)
        let newest = FencingToken(epoch: FencingToken(value: 1 << 62).epoch + 1, counter: 1)
        var first: LedgerAnswer?
        // Redis starts the record's 60 s retention when the charge lands: no earlier than the
        // attempt that landed was sent.
        var chargeSent = ContinuousClock.now
        try await pollUntil {
            chargeSent = ContinuousClock.now
            first = try? await ledger.charge(LedgerCall(record: "pay:r1", fence: newer, amount: 5, chargeID: "ch_1"), on: loop)
            return first != nil
        }
        #expect(first == .charged("ch_1"))
        #expect(try await ledger.charge(LedgerCall(record: "pay:r1", fence: older, amount: 5, chargeID: "ch_2"), on: loop)
            == .stale(newest: newer))
        #expect(try await ledger.charge(LedgerCall(record: "pay:r1", fence: newer, amount: 5, chargeID: "ch_3"), on: loop)
            == .alreadyCharged("ch_1"))
        #expect(try await ledger.charge(LedgerCall(record: "pay:r1", fence: newest, amount: 5, chargeID: "ch_4"), on: loop)
            == .alreadyCharged("ch_1"))
        // The newest fence is remembered: the one before it is stale now.
        #expect(try await ledger.charge(LedgerCall(record: "pay:r1", fence: newer, amount: 5, chargeID: "ch_5"), on: loop)
            == .stale(newest: newest))
        #expect(try await ledger.charge(LedgerCall(record: "pay:r2", fence: older, amount: 7, chargeID: "ch_6"), on: loop)
            == .charged("ch_6"))
        #expect(try await redis.command(["HGET", "ledger:pay:r1", "charge"]) == "ch_1")
        let ttlText = try await redis.command(["PTTL", "ledger:pay:r1"])
        let sinceCharge = ContinuousClock.now - chargeSent
        let ttl = try #require(ttlText.flatMap { Int($0) })
        // 60 s less what passed since the charge was sent (less a millisecond of rounding),
        // however slowly the calls in between ran.
        let floor = 60_000 - Int((sinceCharge / .milliseconds(1)).rounded(.up)) - 1
        #expect(ttl >= floor && ttl <= 60_000, "TTL \(ttl) ms, \(sinceCharge) after the charge was sent")
        // Redis gone: no answer, and the caller is told so rather than guessing.
        redis.kill()
        await #expect(throws: ChargeLedgerError.self) {
            _ = try await ledger.charge(LedgerCall(record: "pay:r3", fence: older, amount: 1, chargeID: "ch_7"), on: loop)
        }
        await ledger.shutdown()
    }
}
