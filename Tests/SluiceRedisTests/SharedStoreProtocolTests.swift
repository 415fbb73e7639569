import Foundation
import Sluice
import SluiceCore
@testable import SluiceRedis
import SluiceTestSupport
import Synchronization
import Testing

/// The store protocol, held by both implementations: the in-memory reference and Redis (a
/// `redis-server` this suite starts).
///
/// The memory store reads a manual clock: its leases and retentions run out only when a test
/// moves the clock (``Fixture/elapse(_:)``), never because the machine is slow. Redis keeps its
/// own clock: there a lease that must hold is 60 s (a sanitized run on a busy machine takes a
/// second or two per test), and one that must have run out is made to
/// (``Fixture/letLeaseRunOut(_:lease:)``) or waited for by polling Redis with a deadline.
@Suite(.serialized, .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed"))
struct SharedStoreProtocolTests {
    enum Kind: String, CaseIterable, Sendable {
        case memory
        case redis
    }

    /// A clock that moves only when a test moves it, readable from any thread.
    final class SteppedClock: Sendable {
        private let nanoseconds = Atomic<Int64>(1_000_000_000)

        var now: Instant { Instant(nanoseconds: nanoseconds.load(ordering: .acquiring)) }

        func advance(by duration: Duration) {
            nanoseconds.add(duration.nanosecondsClamped, ordering: .releasing)
        }
    }

    /// A store of `kind` on a loop of its own, with the Redis server behind it.
    final class Fixture: Sendable {
        let group: SluiceLoopGroup
        let store: any SharedStore
        let redis: RedisServerProcess?
        /// The memory store's clock.
        let memoryClock = SteppedClock()

        init(_ kind: Kind) async throws {
            group = try SluiceLoopGroup(loopCount: 1, namePrefix: "store-test")
            switch kind {
            case .memory:
                redis = nil
                let clock = memoryClock
                store = MemoryStore { clock.now }
            case .redis:
                let server = try await RedisServerProcess.start()
                redis = server
                // A call timeout far above what a call takes under a sanitizer on a busy machine.
                let store = RedisStore(endpoint: try RedisEndpoint(url: server.url()), group: group, timeout: .seconds(5))
                store.start()
                self.store = store
                let loop = group.loops[0]
                try await pollUntil { await loop.submit { store.isConnected(on: loop) } }
            }
        }

        var loop: SluiceLoop { group.loops[0] }

        /// Moves the memory store's clock forward by `duration` (Redis's clock moves by itself).
        func elapse(_ duration: Duration) {
            memoryClock.advance(by: duration)
        }

        /// Makes `record`'s lease run out now, as if its owner had not renewed it for `lease`:
        /// the memory store's clock moves past it; in Redis the record's key (whose TTL is the
        /// lease) is deleted, as its expiry would, while the fence counter (kept for four
        /// leases) stays. Deleting it rather than waiting for the TTL keeps the test from
        /// racing the fence counter's own expiry on a slow machine.
        func letLeaseRunOut(_ record: StoreKey, lease: Duration) async throws {
            elapse(lease + .nanoseconds(1))
            if let redis {
                _ = try await redis.command(["DEL", "sluice:{\(record.plugin):\(record.key)}:r"])
            }
        }

        func call<Value: Sendable>(
            _ body: @escaping @Sendable (SluiceLoop, @escaping @Sendable (Result<Value, StoreError>) -> Void) -> Void
        ) async -> Result<Value, StoreError> {
            let loop = self.loop
            return await withCheckedContinuation { continuation in
                loop.execute { body(loop) { continuation.resume(returning: $0) } }
            }
        }

        func claim(
            _ key: StoreKey, _ fingerprint: String, owner: String, lease: Duration, retention: Duration = .seconds(60)
        ) async -> Result<StoreClaim, StoreError> {
            await call { loop, done in
                self.store.claim(key, fingerprint: fingerprint, owner: owner, lease: lease, retention: retention, on: loop, done)
            }
        }

        func complete(_ key: StoreKey, _ lease: StoreLease, _ fingerprint: String, _ result: String, retention: Duration) async -> Result<Bool, StoreError> {
            await call { loop, done in
                self.store.complete(key, lease: lease, fingerprint: fingerprint, result: Array(result.utf8), retention: retention, on: loop, done)
            }
        }

        func shutdown() {
            (store as? RedisStore)?.close()
            group.shutdownGracefully()
            redis?.stop()
        }
    }

    static func pttl(_ redis: RedisServerProcess, _ key: String) async throws -> Int {
        let reply = try await redis.command(["PTTL", key])
        return try #require(reply.flatMap { Int($0) })
    }

    @Test(arguments: Kind.allCases) func aClaimIsHeldCompletedAndReplayedWithItsFingerprint(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let key = StoreKey(plugin: "pay", key: "a{b}c:\(kind)")
        guard case .success(.claimed(let lease)) = await fixture.claim(key, "500", owner: "one", lease: .seconds(60)) else {
            Issue.record("the first claim should win")
            return
        }
        #expect(try await fixture.claim(key, "500", owner: "two", lease: .seconds(60)).get() == .running)
        #expect(try await fixture.claim(key, "501", owner: "two", lease: .seconds(60)).get() == .mismatch(storedFingerprint: "500"))
        #expect(try await fixture.complete(key, lease, "500", "Sresult", retention: .seconds(60)).get())
        #expect(try await fixture.complete(key, lease, "500", "Sresult", retention: .seconds(60)).get())  // a retried write
        #expect(try await fixture.claim(key, "500", owner: "two", lease: .seconds(60)).get() == .completed(Array("Sresult".utf8)))
        // The fingerprint is kept with the result: another payload is still a mismatch.
        #expect(try await fixture.claim(key, "7", owner: "two", lease: .seconds(60)).get() == .mismatch(storedFingerprint: "500"))
    }

    /// A lease that ran out is taken over with a greater fence; the stale owner can neither
    /// renew, complete nor release the new owner's record.
    @Test(arguments: Kind.allCases) func aStaleOwnersCompletionIsRefused(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let key = StoreKey(plugin: "pay", key: "stale-\(kind)")
        guard case .success(.claimed(let stale)) = await fixture.claim(key, "1", owner: "old", lease: .seconds(5)) else {
            Issue.record("the first claim should win")
            return
        }
        try await fixture.letLeaseRunOut(key, lease: .seconds(5))
        guard case .success(.claimed(let current)) = await fixture.claim(key, "1", owner: "new", lease: .seconds(30)) else {
            Issue.record("a record whose lease ran out should be claimed again")
            return
        }
        #expect(current.fence > stale.fence)
        #expect(try await fixture.call { loop, done in fixture.store.renew(key, lease: stale, fingerprint: "1", duration: .seconds(30), on: loop, done) }.get() == false)
        #expect(try await fixture.complete(key, stale, "1", "Sstale", retention: .seconds(60)).get() == false)
        #expect(try await fixture.call { loop, done in fixture.store.release(key, lease: stale, on: loop, done) }.get() == false)
        #expect(try await fixture.call { loop, done in fixture.store.renew(key, lease: current, fingerprint: "1", duration: .seconds(30), on: loop, done) }.get())
        #expect(try await fixture.complete(key, current, "1", "Snew", retention: .seconds(60)).get())
        #expect(try await fixture.claim(key, "1", owner: "third", lease: .seconds(60)).get() == .completed(Array("Snew".utf8)))
    }

    /// An owner whose lease ran out while no one claimed the record still stores its result.
    @Test(arguments: Kind.allCases) func aSlowOwnerStillCompletesAnUnclaimedRecord(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let key = StoreKey(plugin: "pay", key: "slow-\(kind)")
        guard case .success(.claimed(let lease)) = await fixture.claim(key, "1", owner: "slow", lease: .seconds(5)) else {
            Issue.record("the first claim should win")
            return
        }
        try await fixture.letLeaseRunOut(key, lease: .seconds(5))
        #expect(try await fixture.complete(key, lease, "1", "Sdone", retention: .seconds(60)).get())
        #expect(try await fixture.claim(key, "1", owner: "other", lease: .seconds(60)).get() == .completed(Array("Sdone".utf8)))
    }

    /// An owner whose lease ran out while no one claimed the record renews it: the record is
    /// open again under its lease, and a later claim finds it running.
    @Test(arguments: Kind.allCases) func aLeaseThatRanOutUnclaimedIsRenewed(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let key = StoreKey(plugin: "pay", key: "renew-\(kind)")
        guard case .success(.claimed(let lease)) = await fixture.claim(key, "1", owner: "late", lease: .seconds(5)) else {
            Issue.record("the first claim should win")
            return
        }
        try await fixture.letLeaseRunOut(key, lease: .seconds(5))
        #expect(try await fixture.call { loop, done in fixture.store.renew(key, lease: lease, fingerprint: "1", duration: .seconds(30), on: loop, done) }.get())
        #expect(try await fixture.claim(key, "1", owner: "other", lease: .seconds(60)).get() == .running)
        #expect(try await fixture.claim(key, "2", owner: "other", lease: .seconds(60)).get() == .mismatch(storedFingerprint: "1"))
    }

    @Test(arguments: Kind.allCases) func recordsExpireWithTheirRetention(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let key = StoreKey(plugin: "pay", key: "ttl-\(kind)")
        guard case .success(.claimed(let lease)) = await fixture.claim(key, "1", owner: "one", lease: .seconds(60)) else {
            Issue.record("the first claim should win")
            return
        }
        // Redis counts the retention on its own clock, from the completing script: long enough
        // that a busy machine reads the TTL before it runs out, short enough to wait for.
        let retentionMs = fixture.redis == nil ? 300 : 3_000
        let completing = ContinuousClock.now
        #expect(try await fixture.complete(key, lease, "1", "Sshort", retention: .milliseconds(retentionMs)).get())
        if let redis = fixture.redis {
            let ttl = try await Self.pttl(redis, "sluice:{pay:ttl-redis}:r")
            let elapsed = ContinuousClock.now - completing
            // The retention less what passed since the completing script was sent (less a
            // millisecond of rounding); once that is all of it, the record may be due (0) or gone (-2).
            let floor = retentionMs - Int((elapsed / .milliseconds(1)).rounded(.up)) - 1
            let ended = floor <= 0 && (ttl == 0 || ttl == -2)
            #expect((max(1, floor)...retentionMs).contains(ttl) || ended, "record TTL \(ttl) ms, \(elapsed) after completing")
            #expect(try await Self.pttl(redis, "sluice:{pay:ttl-redis}:f") > retentionMs)
        }
        fixture.elapse(.milliseconds(retentionMs + 1))
        try await pollUntil {
            if case .success(.claimed) = await fixture.claim(key, "2", owner: "later", lease: .seconds(60)) { return true }
            return false
        }
    }

    @Test(arguments: Kind.allCases) func throttleAndRateLimitDecideWithTheStoresClock(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        // Redis decides on its own clock: a wait is 10 s less what passed between the calls,
        // which the test measures (on a loaded machine it can be more than a second), less a
        // millisecond of Redis's rounding.
        let tap = StoreKey(plugin: "tap", key: "user-\(kind)")
        let throttleStart = ContinuousClock.now
        #expect(try await fixture.call { loop, done in fixture.store.throttle(tap, interval: .seconds(10), on: loop, done) }.get() == nil)
        let wait = try await fixture.call { loop, done in fixture.store.throttle(tap, interval: .seconds(10), on: loop, done) }.get()
        let throttleElapsed = ContinuousClock.now - throttleStart
        #expect(wait.map { $0 > .seconds(10) - throttleElapsed - .milliseconds(1) && $0 <= .seconds(10) } == true, "\(String(describing: wait))")
        let options = try RateLimitOptions(count: 1, per: .seconds(10), burst: 1)
        let api = StoreKey(plugin: "limit", key: "api-\(kind)")
        var decisions: [RateLimitDecision] = []
        let rateStart = ContinuousClock.now
        for _ in 0..<3 {
            decisions.append(try await fixture.call { loop, done in fixture.store.rateLimit(api, options: options, cost: 1, on: loop, done) }.get())
        }
        let rateElapsed = ContinuousClock.now - rateStart
        #expect(decisions.map(\.allowed) == [true, true, false])
        #expect(decisions.map(\.remaining) == [1, 0, 0])
        #expect(decisions.map(\.limit) == [2, 2, 2])
        #expect(
            decisions[2].retryAfter.map { $0 > .seconds(10) - rateElapsed - .milliseconds(1) && $0 <= .seconds(10) } == true,
            "\(decisions[2])")
        if let redis = fixture.redis {
            for key in ["sluice:{tap:user-redis}:t", "sluice:{limit:api-redis}:g"] {
                let ttl = try await Self.pttl(redis, key)
                #expect(ttl > 0 && ttl <= 20_000, "\(key): \(ttl)")
            }
        }
    }

    /// A store that lost its data (the memory store's `loseData()`, Redis's `FLUSHALL`) starts
    /// a new epoch: a record claimed again gets a greater fence, in a greater epoch, than every
    /// claim before; a lease of the earlier epoch can neither renew, complete nor release.
    @Test(arguments: Kind.allCases) func aStoreThatLostItsDataGrantsGreaterFences(kind: Kind) async throws {
        let fixture = try await Fixture(kind)
        defer { fixture.shutdown() }
        let running = StoreKey(plugin: "pay", key: "lost-running")
        let done = StoreKey(plugin: "pay", key: "lost-done")
        guard case .success(.claimed(let before)) = await fixture.claim(running, "1", owner: "one", lease: .seconds(60)),
            case .success(.claimed(let doneLease)) = await fixture.claim(done, "1", owner: "one", lease: .seconds(60))
        else {
            Issue.record("the first claims should succeed")
            return
        }
        #expect(try await fixture.complete(done, doneLease, "1", "Sok", retention: .seconds(60)).get())
        switch kind {
        case .memory: (fixture.store as? MemoryStore)?.loseData()
        case .redis:
            // The new marker gets a later millisecond of Redis's clock than the first (a store
            // losing its data in the very millisecond it was first used would keep its epoch:
            // the documented limit of an epoch read from a clock).
            let redis = try #require(fixture.redis)
            let epoch = try #require(try await redis.command(["GET", "sluice:epoch"]).flatMap { Int($0) })
            try await pollUntil {
                let now = try await redis.command([
                    "EVAL", "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)", "0",
                ])
                return (now.flatMap { Int($0) } ?? 0) > epoch
            }
            #expect(try await redis.command(["FLUSHALL"]) == "OK")
        }
        guard case .success(.claimed(let after)) = await fixture.claim(running, "1", owner: "two", lease: .seconds(60)) else {
            Issue.record("a record the store lost is claimed again")
            return
        }
        #expect(after.fence > before.fence)
        #expect(after.fence.epoch > before.fence.epoch)
        guard case .success(.claimed(let again)) = await fixture.claim(done, "1", owner: "two", lease: .seconds(60)) else {
            Issue.record("a completed record the store lost is claimed again")
            return
        }
        #expect(again.fence > doneLease.fence)
        let store = fixture.store
        #expect(try await fixture.call { loop, done in
            store.renew(running, lease: before, fingerprint: "1", duration: .seconds(60), on: loop, done)
        }.get() == false)
        #expect(try await fixture.complete(running, before, "1", "Sstale", retention: .seconds(60)).get() == false)
        #expect(try await fixture.call { loop, done in store.release(running, lease: before, on: loop, done) }.get() == false)
        // The new owner's lease is untouched.
        #expect(try await fixture.complete(running, after, "1", "Snew", retention: .seconds(60)).get())
        #expect(try await fixture.claim(running, "1", owner: "three", lease: .seconds(60)).get() == .completed(Array("Snew".utf8)))
    }

    /// `SCRIPT FLUSH` drops the scripts: the next call reloads its script and answers.
    @Test func aScriptFlushIsSurvived() async throws {
        let fixture = try await Fixture(.redis)
        defer { fixture.shutdown() }
        let redis = try #require(fixture.redis)
        let tap = StoreKey(plugin: "tap", key: "flush")
        #expect(try await fixture.call { loop, done in fixture.store.throttle(tap, interval: .milliseconds(1), on: loop, done) }.get() == nil)
        #expect(try await redis.command(["SCRIPT", "FLUSH"]) == "OK")
        let result = await fixture.call { loop, done in fixture.store.throttle(tap, interval: .milliseconds(1), on: loop, done) }
        #expect(throws: Never.self) { try result.get() }
        let key = StoreKey(plugin: "pay", key: "flush")
        #expect(try await redis.command(["SCRIPT", "FLUSH"]) == "OK")
        guard case .success(.claimed) = await fixture.claim(key, "1", owner: "one", lease: .seconds(60)) else {
            Issue.record("a claim right after SCRIPT FLUSH should succeed")
            return
        }
    }
}

/// `EVALSHA` names a script by its SHA-1: the digest must be Redis's.
@Suite struct ScriptNameTests {
    @Test func theSHA1OfAScriptIsTheStandardDigest() {
        #expect(SHA1.hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SHA1.hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SHA1.hex(String(repeating: "x", count: 1000)) == "c3efa690fa3fdd2e2526853eed670538ea127638")
    }
}
