import ServiceLifecycle

/// A `RedisStore` runs as a swift-service-lifecycle service: list it before the gate in the
/// `ServiceGroup`, so that on a graceful shutdown the group stops the fronts, then the gate
/// (which drains its requests, answering the store's last calls), then the store. The loops
/// are the embedding program's to stop, after the group has returned.
extension RedisStore: Service {
    /// Connects every loop's connection (``start()``; a store started already stays as it is),
    /// waits for the group's graceful shutdown (or for the task's cancellation), then closes
    /// every connection on its loop and returns once they are closed (``shutdown()``).
    public func run() async throws {
        start()
        try? await gracefulShutdown()
        await shutdown()
    }
}
