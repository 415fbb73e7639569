/// How a ``TCPServer`` listens and treats its connections.
public struct TCPConfiguration: Sendable, Hashable {
    /// The address to bind: an IPv4 or IPv6 literal, or `localhost`.
    public var host: String
    /// The port to bind; 0 picks a free port (every loop then shares the first loop's port).
    public var port: Int
    /// The longest line accepted, in bytes, CR and LF not counted.
    public var maximumLineLength: Int
    /// Output bytes above which the connection stops reading (its peer is not draining replies).
    public var outputHighWatermark: Int
    /// Output bytes at or below which a paused connection reads again.
    public var outputLowWatermark: Int
    /// A connection that sends nothing for this long, or takes none of the output waiting for
    /// it for this long, is closed; `nil` never closes one.
    public var idleTimeout: Duration?
    /// The listen backlog.
    public var backlog: Int

    /// A configuration with the defaults of `sluice-echo`.
    public init(
        host: String = "127.0.0.1",
        port: Int = 7070,
        maximumLineLength: Int = 8192,
        outputHighWatermark: Int = 1 << 20,
        outputLowWatermark: Int = 256 << 10,
        idleTimeout: Duration? = .seconds(300),
        backlog: Int = 1024
    ) {
        self.host = host
        self.port = port
        self.maximumLineLength = maximumLineLength
        self.outputHighWatermark = outputHighWatermark
        self.outputLowWatermark = outputLowWatermark
        self.idleTimeout = idleTimeout
        self.backlog = backlog
    }

    /// Checks every field; throws ``EventLoopError`` with code `.invalidArgument` naming the
    /// first field that is out of range.
    public func validate() throws(EventLoopError) {
        func fail(_ message: String, _ input: some CustomStringConvertible) throws(EventLoopError) {
            throw EventLoopError(code: .invalidArgument, message: message, input: input.description)
        }
        if !(0...65535).contains(port) { try fail("port must be 0...65535", port) }
        if maximumLineLength < 1 { try fail("maximumLineLength must be at least 1", maximumLineLength) }
        if outputHighWatermark < 1 { try fail("outputHighWatermark must be at least 1", outputHighWatermark) }
        if outputLowWatermark < 0 || outputLowWatermark >= outputHighWatermark {
            try fail("outputLowWatermark must be 0 or more and below outputHighWatermark", outputLowWatermark)
        }
        if let idleTimeout, idleTimeout <= .zero { try fail("idleTimeout must be positive", idleTimeout) }
        if backlog < 1 { try fail("backlog must be at least 1", backlog) }
    }
}
