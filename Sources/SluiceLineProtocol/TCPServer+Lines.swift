import Logging
import SluiceCore
import SluiceLibevent

extension TCPServer {
    /// Binds a listener on every loop of `group`, framing each connection's bytes into lines
    /// for the handler `makeLineHandler` makes for it (on the accepting loop's thread).
    ///
    /// - Parameters:
    ///   - group: the loops to listen on, one listener each, sharing the port.
    ///   - configuration: the address, the limits and the timeouts of the connections.
    ///   - framing: the longest line and how long a line may take.
    ///   - refusal: the bytes a connection over the configuration's `maximumConnections` gets
    ///     before it is closed (a protocol's "too many connections" line).
    ///   - accounting: the connection cap and buffer budget shared with other servers; `nil`
    ///     makes one from the configuration, for this server alone.
    ///   - logger: where accept failures (out of descriptors or memory) are logged, one line
    ///     when they start and one when accepting works again.
    ///   - makeLineHandler: makes each connection's line handler, on the accepting loop's thread.
    /// - Throws: `SluiceError`: `.invalidOption` for a bad configuration or framing,
    ///   `.bindFailed` when the address cannot be bound. Listeners already bound are closed.
    public static func bind(
        group: SluiceLoopGroup,
        configuration: TCPConfiguration,
        framing: LineFraming = LineFraming(),
        refusal: [UInt8] = [],
        accounting: ConnectionAccounting? = nil,
        logger: Logger = Logger(label: "sluice.tcp"),
        makeLineHandler: @escaping @Sendable (TCPConnection) -> any TCPLineHandler
    ) async throws -> TCPServer {
        try framing.validate(for: configuration)
        let turnDuration = configuration.turnDuration
        return try await bind(group: group, configuration: configuration, refusal: { refusal }, accounting: accounting, logger: logger) {
            LineFramingHandler(makeLineHandler($0), framing: framing, turnDuration: turnDuration)
        }
    }
}

extension TCPClient {
    /// Connects to `host:port`, then starts a `TCPConnection` for the socket on `loop` and
    /// hands its lines to the handler `makeLineHandler` returns (called on the loop thread).
    ///
    /// The TCP handshake runs on the caller's thread with a timeout (a non-blocking `connect`
    /// and `poll`), not on the loop: on loopback it completes at once; to a remote host it may
    /// take up to `timeout`.
    ///
    /// - Parameters:
    ///   - host: an IPv4 or IPv6 literal, or `localhost`.
    ///   - port: the server's port.
    ///   - loop: the loop the connection runs on.
    ///   - configuration: output watermarks and idle timeout for the connection (its `host`,
    ///     `port` and `backlog` are not used). The default has no idle timeout.
    ///   - framing: the longest line and how long a line may take.
    ///   - timeout: how long the TCP handshake may take.
    ///   - makeLineHandler: makes the connection's line handler, on the loop thread.
    /// - Throws: `SluiceError`: `.invalidOption` for a bad address, port or framing,
    ///   `.bindFailed` when the connection is refused, times out or the socket cannot be
    ///   created.
    public static func connect(
        host: String,
        port: Int,
        on loop: SluiceLoop,
        configuration: TCPConfiguration = TCPConfiguration(idleTimeout: nil),
        framing: LineFraming = LineFraming(),
        timeout: Duration = .seconds(5),
        makeLineHandler: @escaping @Sendable (TCPConnection) -> any TCPLineHandler
    ) async throws(SluiceError) -> TCPConnection {
        try framing.validate(for: configuration)
        let turnDuration = configuration.turnDuration
        return try await connect(host: host, port: port, on: loop, configuration: configuration, timeout: timeout) {
            LineFramingHandler(makeLineHandler($0), framing: framing, turnDuration: turnDuration)
        }
    }
}
