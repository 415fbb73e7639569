import Logging
import SluiceCore

/// A TCP server on every loop of a group: one listener per loop, sharing one listening socket
/// (or with `reusePort`, the port), each connection a bounded ``TCPConnection`` on the loop
/// that accepted it, its bytes handed to a ``TCPConnectionHandler``. The transport carries
/// bytes; a protocol frames them (the line front's `TCPLineHandler` adds a `bind` that cuts
/// lines).
///
/// ```swift
/// let server = try await TCPServer.bind(group: group, configuration: .init(port: 7070)) { _ in
///     MyByteHandler()
/// }
/// ```
public final class TCPServer: Sendable {
    /// The loops this server listens on.
    public let group: SluiceLoopGroup
    /// The configuration it was bound with.
    public let configuration: TCPConfiguration
    /// The port actually bound (differs from the configuration's when that was 0).
    public let port: Int
    private let listeners: [TCPListener]
    private let accounting: ConnectionAccounting

    private init(
        group: SluiceLoopGroup, configuration: TCPConfiguration, port: Int, listeners: [TCPListener],
        accounting: ConnectionAccounting
    ) {
        self.accounting = accounting
        self.group = group
        self.configuration = configuration
        self.port = port
        self.listeners = listeners
    }

    /// Binds a listener on every loop of `group`, handing each connection's bytes to the
    /// handler `makeHandler` makes for it (on the accepting loop's thread).
    ///
    /// - Parameters:
    ///   - group: the loops to listen on, one listener each, sharing the port.
    ///   - configuration: the address, the limits and the timeouts of the connections.
    ///   - refusal: makes the bytes a connection over ``TCPConfiguration/maximumConnections``
    ///     gets before it is closed (for each refused connection: an answer that carries the
    ///     time, say).
    ///   - accounting: the connection cap and buffer budget shared with other servers; `nil`
    ///     makes one from the configuration, for this server alone.
    ///   - logger: where accept failures (out of descriptors or memory) are logged, one line
    ///     when they start and one when accepting works again.
    ///   - makeHandler: makes each connection's byte handler, on the accepting loop's thread.
    /// - Throws: `SluiceError`: `.invalidOption` for a bad configuration,
    ///   `.bindFailed` when the address cannot be bound. Listeners already bound are closed.
    public static func bind(
        group: SluiceLoopGroup,
        configuration: TCPConfiguration,
        refusal: @escaping @Sendable () -> [UInt8] = { [] },
        accounting: ConnectionAccounting? = nil,
        logger: Logger = Logger(label: "sluice.tcp"),
        makeHandler: @escaping @Sendable (TCPConnection) -> any TCPConnectionHandler
    ) async throws -> TCPServer {
        try configuration.validate()
        let accounting = accounting ?? ConnectionAccounting(configuration: configuration)
        var listeners: [TCPListener] = []
        var port = configuration.port
        var sharedSocket: Int32?
        do {
            for (index, loop) in group.loops.enumerated() {
                let boundPort = port
                let sharing = sharedSocket
                // The bound port comes back with the listener, read on the loop that made it.
                let (listener, listenerPort, socket) = try await loop.submit {
                    () throws(SluiceError) -> (TCPListener, Int, Int32?) in
                    let listener = try TCPListener(
                        loop: loop, loopIndex: index, port: boundPort, sharing: sharing, configuration: configuration,
                        accounting: accounting, refusal: refusal, logger: logger, makeHandler: makeHandler)
                    return (listener, listener.port, listener.socket)
                }
                listeners.append(listener)
                // With port 0 the first listener picks the port; the others share it (its socket,
                // or with reusePort, its port).
                port = listenerPort
                if !configuration.reusePort, index == 0 { sharedSocket = socket }
            }
        } catch {
            for listener in listeners {
                await listener.loop.submit { listener.close() }
            }
            throw error
        }
        return TCPServer(group: group, configuration: configuration, port: port, listeners: listeners, accounting: accounting)
    }

    /// Stops accepting new connections; open connections stay open.
    public func stopAccepting() async {
        for listener in listeners {
            await listener.loop.submit { listener.close() }
        }
    }

    /// Bytes held in the buffers of every connection (input not yet handled, output not yet
    /// sent), as last reported by each connection.
    public var bufferedBytes: Int { accounting.heldBufferBytes }

    /// The number of open connections, over all loops.
    public func connectionCount() async -> Int {
        var total = 0
        for listener in listeners {
            total += await listener.loop.submit { listener.openConnections }
        }
        return total
    }
}
