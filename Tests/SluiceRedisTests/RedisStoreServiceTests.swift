import Logging
import ServiceLifecycle
import Sluice
import SluiceLibevent
import SluiceRedis
import SluiceTestSupport
import Testing

/// `RedisStore` as a swift-service-lifecycle service, against a real `redis-server`.
@Suite("RedisStore as a service", .serialized, .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed"))
struct RedisStoreServiceTests {
    /// Run in a `ServiceGroup`, the store connects on its own; on the group's graceful shutdown it
    /// closes its connections, answers later calls `unavailable`, and its `run()` returns.
    @Test func aStoreInAServiceGroupConnectsAndClosesOnGracefulShutdown() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        let group = try SluiceLoopGroup(loopCount: 2, namePrefix: "redis-service")
        defer { group.shutdownGracefully() }
        let store = RedisStore(endpoint: try RedisEndpoint(url: redis.url()), group: group, timeout: .seconds(5))
        let serviceGroup = ServiceGroup(services: [store], logger: Logger(label: "redis-service-test"))
        let running = Task { try await serviceGroup.run() }

        for loop in group.loops {
            try await pollUntil(seconds: 10) { await loop.submit { store.isConnected(on: loop) } }
        }
        let loop = group.loops[0]
        let before = await throttle(store, key: "service", on: loop)
        #expect(try before.get() == nil, "the first event of a key runs")

        await serviceGroup.triggerGracefulShutdown()
        try await running.value
        for loop in group.loops {
            #expect(await loop.submit { store.isConnected(on: loop) } == false)
        }
        let after = await throttle(store, key: "service-after", on: loop)
        #expect(after.failure?.code == .unavailable)
    }

    private func throttle(_ store: RedisStore, key: String, on loop: SluiceLoop) async -> Result<Duration?, StoreError> {
        await withCheckedContinuation { continuation in
            loop.execute {
                store.throttle(StoreKey(plugin: "tap", key: key), interval: .seconds(60), on: loop) { continuation.resume(returning: $0) }
            }
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
