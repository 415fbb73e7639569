import SluiceCore

/// How a ``TCPServer`` listens and treats its connections.
public struct TCPConfiguration: Sendable, Hashable {
    /// The address to bind: an IPv4 or IPv6 literal, or `localhost`.
    public var host: String
    /// The port to bind; 0 picks a free port (every loop then shares the first loop's port).
    public var port: Int
    /// Output bytes above which the connection stops reading (its peer is not draining replies).
    public var outputHighWatermark: Int
    /// Output bytes at or below which a paused connection reads again.
    public var outputLowWatermark: Int
    /// The most output the kernel holds unsent for one connection (`TCP_NOTSENT_LOWAT`): past
    /// it the socket takes no more, and the rest waits in the connection's own buffer, under
    /// ``outputHighWatermark`` and ``connectionBufferBudget``. Bytes sent and not yet
    /// acknowledged are not counted (the peer's receive window bounds them), so a peer that
    /// reads keeps its full window. `nil` leaves the kernel's own limit: the send buffer, which
    /// grows to `net.ipv4.tcp_wmem`'s maximum (4 MiB by default on Linux) for a peer that
    /// stops reading, a cost no budget of the process sees.
    public var socketUnsentLimit: Int?
    /// A connection that sends nothing for this long, or takes none of the output waiting for
    /// it for this long, is closed; `nil` never closes one.
    public var idleTimeout: Duration?
    /// Open connections allowed over all loops; a connection over the cap gets the server's
    /// refusal bytes and is closed at once. `nil` sets no cap.
    public var maximumConnections: Int?
    /// Bytes all of the server's connections may hold in their buffers together (input read
    /// but not yet handled, output not yet sent: the memory their buffers take). Over it, every
    /// connection holding more than a little (16 KiB) stops reading until the total is back
    /// under it; the others are still served, each reading only while it holds less than that
    /// little and no more than brings it there (what it then holds is that input, or the
    /// answers to it, in buffers rounded up to their growth steps). `nil` sets no budget.
    public var connectionBufferBudget: Int?
    /// How long accepting pauses after the system refused a new connection for want of
    /// descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`); it doubles while the
    /// refusals go on, up to 16 times this.
    public var acceptBackoff: Duration
    /// The listen backlog.
    public var backlog: Int
    /// The most input a connection keeps that its handler has not consumed yet (an incomplete
    /// frame, or frames waiting while reading is paused). A handler refuses frames larger than
    /// this; at it, the connection stops reading until the handler consumes some.
    public var maximumBufferedInput: Int
    /// How long one connection's input (its lines, its requests) may be handled in a row before the loop turns to its
    /// other connections: past it, the rest of what the connection sent waits (and reading
    /// pauses) in the loop's queue of busy connections, as does a connection whose read filled
    /// the read buffer. Each pass of the loop serves the sockets that became ready, then that
    /// queue for about a millisecond, so a request from a client that sends a little waits
    /// about that long behind any number of pipelined floods, and the floods take turns.
    /// `nil` hands over everything read at once.
    public var turnDuration: Duration?
    /// Whether to share the port with other processes' sockets (`SO_REUSEPORT`): the kernel then
    /// spreads new connections over every process listening on it, and each keeps its own
    /// state in memory (a throttle or an idempotency record in one process's memory is unknown
    /// to the others: share it through a store). Off (the default), binding a port another
    /// socket serves fails (`EADDRINUSE`), so that a forgotten server on the same port is an
    /// error rather than a silent second instance. The loops of one server always share its
    /// one listening socket.
    public var reusePort: Bool

    /// A configuration with the defaults of `sluice-echo`.
    public init(
        host: String = "127.0.0.1",
        port: Int = 7070,
        outputHighWatermark: Int = 64 << 10,
        outputLowWatermark: Int = 16 << 10,
        socketUnsentLimit: Int? = 16 << 10,
        idleTimeout: Duration? = .seconds(300),
        maximumConnections: Int? = 10_000,
        connectionBufferBudget: Int? = 256 << 20,
        acceptBackoff: Duration = .milliseconds(50),
        backlog: Int = 1024,
        turnDuration: Duration? = .microseconds(200),
        maximumBufferedInput: Int = 256 << 10,
        reusePort: Bool = false
    ) {
        self.host = host
        self.port = port
        self.outputHighWatermark = outputHighWatermark
        self.outputLowWatermark = outputLowWatermark
        self.socketUnsentLimit = socketUnsentLimit
        self.idleTimeout = idleTimeout
        self.maximumConnections = maximumConnections
        self.connectionBufferBudget = connectionBufferBudget
        self.acceptBackoff = acceptBackoff
        self.backlog = backlog
        self.turnDuration = turnDuration
        self.maximumBufferedInput = maximumBufferedInput
        self.reusePort = reusePort
    }

    /// Checks every field; throws `SluiceError` with code `.invalidOption` naming the
    /// first field that is out of range.
    public func validate() throws(SluiceError) {
        func fail(_ message: String, _ input: some CustomStringConvertible) throws(SluiceError) {
            throw SluiceError(code: .invalidOption, message: message, value: input.description)
        }
        if !(0...65535).contains(port) { try fail("port must be 0...65535", port) }
        if outputHighWatermark < 1 { try fail("outputHighWatermark must be at least 1", outputHighWatermark) }
        if outputLowWatermark < 0 || outputLowWatermark >= outputHighWatermark {
            try fail("outputLowWatermark must be 0 or more and below outputHighWatermark", outputLowWatermark)
        }
        if let socketUnsentLimit, !(1024...(64 << 20)).contains(socketUnsentLimit) {
            try fail("socketUnsentLimit must be 1 KiB to 64 MiB", socketUnsentLimit)
        }
        if let idleTimeout, idleTimeout <= .zero { try fail("idleTimeout must be positive", idleTimeout) }
        if let maximumConnections, maximumConnections < 1 { try fail("maximumConnections must be at least 1", maximumConnections) }
        if let connectionBufferBudget, connectionBufferBudget < outputHighWatermark {
            try fail("connectionBufferBudget must be at least outputHighWatermark", connectionBufferBudget)
        }
        if acceptBackoff <= .zero { try fail("acceptBackoff must be positive", acceptBackoff) }
        if let turnDuration, turnDuration <= .zero || turnDuration > .seconds(1) {
            try fail("turnDuration must be positive and at most 1 s", turnDuration)
        }
        if backlog < 1 { try fail("backlog must be at least 1", backlog) }
        if maximumBufferedInput < 1 { try fail("maximumBufferedInput must be at least 1", maximumBufferedInput) }
    }
}
