import Logging
import SluiceCore

/// An HTTP/1.1 server on every loop of a group, on libevent's own `evhttp`: one `evhttp` per
/// loop, each listening on the same port (`SO_REUSEPORT`), so a request is parsed and answered
/// on the loop that accepted its connection.
///
/// ```swift
/// let server = try await HTTPServer.bind(group: group, configuration: .init(port: 8080)) { _ in
///     MyHandler()
/// }
/// ```
///
/// Beyond what `evhttp` bounds (body size, idle connections), each connection is watched for a
/// head over ``HTTPConfiguration/maximumHeadBytes`` (431), a head or body that takes too long
/// (408), and the shared connection cap (503 and close).
public final class HTTPServer: Sendable {
    /// The loops this server listens on.
    public let group: EventLoopGroup
    /// The configuration it was bound with.
    public let configuration: HTTPConfiguration
    /// The port actually bound (differs from the configuration's when that was 0).
    public let port: Int
    private let listeners: [HTTPListener]
    private let accounting: ConnectionAccounting

    private init(
        group: EventLoopGroup, configuration: HTTPConfiguration, port: Int, listeners: [HTTPListener],
        accounting: ConnectionAccounting
    ) {
        self.group = group
        self.configuration = configuration
        self.port = port
        self.listeners = listeners
        self.accounting = accounting
    }

    /// Binds an `evhttp` on every loop of `group`. `makeHandler` runs on the accepting loop's
    /// thread, once per connection.
    ///
    /// - Parameters:
    ///   - group: the loops to listen on, one `evhttp` each, sharing the port.
    ///   - configuration: the address, the size caps and the timeouts.
    ///   - accounting: the connection cap shared with other servers (a line server, say); `nil`
    ///     makes one from ``HTTPConfiguration/maximumConnections`` for this server alone.
    ///   - logger: where accept failures are logged, one line per episode.
    ///   - makeHandler: makes each connection's handler, on the accepting loop's thread.
    /// - Throws: ``EventLoopError``: `.invalidArgument` for a bad configuration, `.bindFailed`
    ///   when the address cannot be bound. Listeners already bound are closed.
    public static func bind(
        group: EventLoopGroup,
        configuration: HTTPConfiguration,
        accounting: ConnectionAccounting? = nil,
        logger: Logger = Logger(label: "sluice.http"),
        makeHandler: @escaping @Sendable (HTTPConnection) -> any HTTPConnectionHandler
    ) async throws -> HTTPServer {
        try configuration.validate()
        let accounting = accounting ?? ConnectionAccounting(maximumConnections: configuration.maximumConnections)
        var listeners: [HTTPListener] = []
        var port = configuration.port
        do {
            for (index, loop) in group.loops.enumerated() {
                let boundPort = port
                let (listener, listenerPort) = try await loop.submit { () throws(EventLoopError) -> (HTTPListener, Int) in
                    let listener = try HTTPListener(
                        loop: loop, loopIndex: index, port: boundPort, configuration: configuration,
                        accounting: accounting, logger: logger, makeHandler: makeHandler)
                    return (listener, listener.port)
                }
                listeners.append(listener)
                // With port 0 the first listener picks the port; the others share it.
                port = listenerPort
            }
        } catch {
            for listener in listeners {
                await listener.loop.submit { listener.closeForShutdown() }
            }
            throw error
        }
        return HTTPServer(group: group, configuration: configuration, port: port, listeners: listeners, accounting: accounting)
    }

    /// Stops accepting new connections; open connections stay open (and are answered) until
    /// they close or their loop stops.
    public func stopAccepting() async {
        for listener in listeners {
            await listener.loop.submit { listener.stopAccepting() }
        }
    }

    /// The number of open connections of this server, over all loops.
    public func connectionCount() async -> Int {
        var total = 0
        for listener in listeners {
            total += await listener.loop.submit { listener.openConnections }
        }
        return total
    }
}
