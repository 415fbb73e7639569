import Logging
import ServiceLifecycle
import SluiceCore
import SluiceLibevent

/// A ``TCPServer`` and its loop group as a swift-service-lifecycle `Service`.
///
/// `run()` binds the server, logs where it listens, and waits for a graceful shutdown (a signal
/// given to the `ServiceGroup`, or task cancellation); then it stops accepting, lets the loops
/// run what they have queued, and joins their threads.
public final class LineServerService: Service, Sendable {
    private let group: EventLoopGroup
    private let configuration: TCPConfiguration
    private let makeHandler: @Sendable (TCPConnection) -> any TCPConnectionHandler
    private let logger: Logger
    private let onBound: @Sendable (TCPServer) async -> Void

    /// Creates the service. `onBound` runs once the server listens (tests use it to learn the
    /// port when it was 0).
    public init(
        group: EventLoopGroup,
        configuration: TCPConfiguration,
        logger: Logger,
        onBound: @escaping @Sendable (TCPServer) async -> Void = { _ in },
        makeHandler: @escaping @Sendable (TCPConnection) -> any TCPConnectionHandler
    ) {
        self.group = group
        self.configuration = configuration
        self.makeHandler = makeHandler
        self.logger = logger
        self.onBound = onBound
    }

    public func run() async throws {
        let server: TCPServer
        do {
            server = try await TCPServer.bind(group: group, configuration: configuration, makeHandler: makeHandler)
        } catch {
            group.shutdownGracefully()
            throw error
        }
        logger.info(
            "listening",
            metadata: [
                "host": "\(configuration.host)", "port": "\(server.port)", "loops": "\(group.loops.count)",
            ])
        await onBound(server)
        try? await gracefulShutdown()
        logger.info("shutting down")
        await server.stopAccepting()
        group.shutdownGracefully()
        logger.info("stopped")
    }
}
