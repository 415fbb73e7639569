import Sluice
import SluiceCore
import SluiceLibevent
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// The commit guard reads the clock afresh (``GateClock/freshNow``), not the time a loop cached
/// for its iteration: an effect whose thread stalled after that time was read (a process paused)
/// must not commit on a lease that ran out during the stall.
@Suite struct CommitGuardClockTests {
    /// A manual clock whose fresh reading runs `stall` ahead of its cached one, as a loop's does
    /// after its thread stalled within an iteration: no timer fires (a stalled thread runs none).
    final class StalledClock: GateClock, Sendable {
        let manual = ManualGateClock()
        private let stall = Mutex(Duration.zero)

        func stall(for duration: Duration) { stall.withSanitizedLock { $0 = duration } }

        var now: Instant { manual.now }
        var freshNow: Instant { manual.now + stall.withSanitizedLock { $0 } }

        func schedule(at deadline: Instant, _ body: @escaping @Sendable () -> Void) -> any GateTimer {
            manual.schedule(at: deadline, body)
        }
    }

    /// Holds an effect before its commit guard until the test opens it, and keeps what the guard
    /// answered.
    final class Checkpoint: Sendable {
        private let latch = TestLatch()
        private let recorded = Mutex<[CommitRefusal.Code?]>([])

        var isWaiting: Bool { latch.hasWaiters }
        var answers: [CommitRefusal.Code?] { recorded.withSanitizedLock { $0 } }

        func wait() async { await latch.wait() }

        func open() { latch.open() }

        func record(_ answer: CommitRefusal.Code?) { recorded.withSanitizedLock { $0.append(answer) } }
    }

    /// Waits at its checkpoint, then asks the commit guard.
    struct GuardedPlugin: GatePlugin {
        let name = "guarded"
        let policy: GatePolicy
        let checkpoint: Checkpoint

        init(lease: Duration, checkpoint: Checkpoint) throws {
            policy = .idempotent(try IdempotencyOptions(retention: .seconds(60), lease: lease))
            self.checkpoint = checkpoint
        }

        func key(for input: String) -> String { input }

        func run(_ input: String, context: EffectContext) async throws -> Int {
            await checkpoint.wait()
            do {
                _ = try context.commit()
                checkpoint.record(nil)
            } catch {
                checkpoint.record(error.code)
            }
            return 1
        }
    }

    @Test(arguments: [Duration.zero, .seconds(2)])
    func aLeaseThatRanOutDuringAStallIsNotCommitted(stall: Duration) async throws {
        let clock = StalledClock()
        let checkpoint = Checkpoint()
        var plugins = PluginRegistry()
        let guarded = try plugins.register(
            try GuardedPlugin(lease: .seconds(1), checkpoint: checkpoint),
            store: try .shared(MemoryStore(now: { clock.manual.now })))
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "guard")
        defer { group.shutdownGracefully() }
        let gate = try Gate(group: group, plugins: plugins, clock: { _ in clock })
        let ticket = await gate.start(gate.request(guarded, "k"))
        try await pollUntil { checkpoint.isWaiting }
        // Without a stall the lease is fresh and the guard lets the effect commit; after a stall
        // of twice the lease, which the cached time does not show, it refuses.
        clock.stall(for: stall)
        checkpoint.open()
        _ = try await ticket.settledOutcome()
        #expect(checkpoint.answers == [stall == .zero ? nil : .leaseNotSafe])
        await gate.shutdown(gracePeriod: .zero)
    }

    /// On its loop, a loop's clock caches `now` for the iteration; `freshNow` reads the time.
    @Test func aLoopClocksFreshReadingIsNotTheIterationsCachedOne() async throws {
        let loop = try SluiceLoop(name: "fresh")
        defer { loop.shutdownGracefully() }
        let clock = LoopGateClock(loop: loop)
        let readings = await loop.submit { () -> (cached: Instant, later: Instant, fresh: Instant) in
            let cached = clock.now
            // Until the monotonic clock has moved on (no sleep: it ticks in nanoseconds).
            while SluiceLoop.monotonicNow() <= cached {}
            return (cached, clock.now, clock.freshNow)
        }
        #expect(readings.later == readings.cached)
        #expect(readings.fresh > readings.cached)
    }
}
