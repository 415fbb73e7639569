import Logging
import Metrics
import ServiceLifecycle
import SluiceCore
import SluiceLibevent
import Synchronization

/// What every front keeps about its listener and its connections: the bound server (so that it
/// can stop accepting), the open connections (a gauge), the requests received (a counter, and
/// when the last one came), and the swift-service-lifecycle run that binds, waits for a graceful
/// shutdown and stops accepting.
public final class FrontListener: Sendable {
    private let bound = Mutex<TCPServer?>(nil)
    private let openConnections = Atomic<Int>(0)
    @usableFromInline let requestCounter: Counter
    private let connectionGauge: Gauge
    /// When the front last received a request (see ``RequestActivity``).
    public let activity = RequestActivity()

    /// A listener whose requests count in the counter `requestsLabel` and whose open
    /// connections show in the gauge `connectionsLabel`.
    public init(requestsLabel: String, connectionsLabel: String) {
        requestCounter = Counter(label: requestsLabel)
        connectionGauge = Gauge(label: connectionsLabel)
    }

    /// Keeps the server the front bound, for ``stopAccepting()``.
    public func listening(on server: TCPServer) {
        bound.withSanitizedLock { $0 = server }
    }

    /// Stops accepting connections; open ones stay open.
    public func stopAccepting() async {
        if let server = bound.withSanitizedLock({ $0 }) {
            await server.stopAccepting()
        }
    }

    /// A front's swift-service-lifecycle run: `start` binds, `onBound` hears the port, a
    /// graceful shutdown is awaited, then the front stops accepting (`stopped` is logged).
    public func run(
        start: () async throws -> Int, onBound: @Sendable (Int) async -> Void, logger: Logger, stopped: Logger.Message
    ) async throws {
        let port = try await start()
        await onBound(port)
        try? await gracefulShutdown()
        logger.info(stopped)
        await stopAccepting()
    }

    /// A connection opened.
    public func connectionOpened() {
        connectionGauge.record(openConnections.add(1, ordering: .relaxed).newValue)
    }

    /// A connection closed.
    public func connectionClosed() {
        connectionGauge.record(openConnections.subtract(1, ordering: .relaxed).newValue)
    }

    /// The number of open connections.
    public var connectionCount: Int { openConnections.load(ordering: .relaxed) }

    /// A request arrived at `instant` (a loop's cached `now`). Inlinable: it is on every
    /// request's path.
    @inlinable
    public func countRequest(at instant: Instant) {
        activity.record(instant)
        requestCounter.increment()
    }
}
