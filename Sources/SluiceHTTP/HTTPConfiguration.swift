import Sluice
import SluiceLibevent

/// How the HTTP server listens and what it accepts from a client: the bounds of every
/// connection, in the same terms as the line front's.
public struct HTTPConfiguration: Sendable, Hashable {
    /// The address to bind: an IPv4 or IPv6 literal, or `localhost`.
    public var host: String
    /// The port to bind; 0 picks a free port (every loop then shares the first loop's port).
    public var port: Int
    /// The largest request head: its bytes from the request line through the blank line that
    /// ends it. A larger one is answered 431 as soon as its bytes show it, and the connection
    /// closes. No separate cap on the target's length or the number of fields sits below it.
    public var maximumHeadBytes: Int
    /// The largest request body (a chunked one counted once decoded); a larger one is answered
    /// 413 as soon as the head (or a chunk size) announces it.
    public var maximumBodyBytes: Int
    /// How long a request head may take from its first byte; past it the client gets 408 and
    /// the connection closes. Time the connection spends paused does not count.
    public var headTimeout: Duration
    /// How long a request body may take once its head is complete; past it, 408 and close.
    public var bodyTimeout: Duration
    /// A connection that sends nothing between requests for this long, or takes none of its
    /// pending answers for this long, is closed.
    public var idleTimeout: Duration
    /// Requests of one connection whose answers are still to come; at the cap, the connection
    /// stops being read until one is answered.
    public var maximumInFlight: Int
    /// Answer bytes a connection may leave unread before it stops being read.
    public var outputHighWatermark: Int
    /// Answer bytes at or below which a paused connection is read again.
    public var outputLowWatermark: Int
    /// Answer bytes the kernel may hold unsent for one connection (see
    /// `TCPConfiguration.socketUnsentLimit`); `nil` leaves the kernel's own limit.
    public var socketUnsentLimit: Int?
    /// How long one connection's requests may be handled in a row before the loop turns to
    /// its other connections (`nil`: everything read at once).
    public var turnDuration: Duration?
    /// Open connections allowed when the front makes its own accounting; `nil` for no cap.
    public var maximumConnections: Int?
    /// Bytes all connections may hold in their buffers together, when the front makes its own
    /// accounting; `nil` for no budget.
    public var connectionBufferBudget: Int?
    /// The listen backlog.
    public var backlog: Int
    /// Whether to share the port with other processes' sockets (see
    /// `TCPConfiguration.reusePort`); off, a port another socket serves is an error.
    public var reusePort: Bool

    /// A configuration with the defaults of `sluice-echo`.
    public init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        maximumHeadBytes: Int = 16 << 10,
        maximumBodyBytes: Int = 1 << 20,
        headTimeout: Duration = .seconds(10),
        bodyTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(60),
        maximumInFlight: Int = 128,
        outputHighWatermark: Int = 64 << 10,
        outputLowWatermark: Int = 16 << 10,
        socketUnsentLimit: Int? = 16 << 10,
        turnDuration: Duration? = .microseconds(200),
        maximumConnections: Int? = 10_000,
        connectionBufferBudget: Int? = 256 << 20,
        backlog: Int = 1024,
        reusePort: Bool = false
    ) {
        self.host = host
        self.port = port
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumBodyBytes = maximumBodyBytes
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
        self.maximumInFlight = maximumInFlight
        self.outputHighWatermark = outputHighWatermark
        self.outputLowWatermark = outputLowWatermark
        self.socketUnsentLimit = socketUnsentLimit
        self.turnDuration = turnDuration
        self.maximumConnections = maximumConnections
        self.connectionBufferBudget = connectionBufferBudget
        self.backlog = backlog
        self.reusePort = reusePort
    }

    /// The parser's limits.
    public var parserLimits: HTTPRequestParser.Limits {
        HTTPRequestParser.Limits(maximumHeadBytes: maximumHeadBytes, maximumBodyBytes: maximumBodyBytes)
    }

    /// The transport's configuration: the same address, watermarks, unsent limit, idle timeout
    /// and turn, with room for one whole request in a connection's input.
    public var tcp: TCPConfiguration {
        TCPConfiguration(
            host: host, port: port, outputHighWatermark: outputHighWatermark,
            outputLowWatermark: outputLowWatermark, socketUnsentLimit: socketUnsentLimit, idleTimeout: idleTimeout,
            maximumConnections: maximumConnections, connectionBufferBudget: connectionBufferBudget,
            backlog: backlog, turnDuration: turnDuration, maximumBufferedInput: parserLimits.maximumMessageBytes,
            reusePort: reusePort)
    }

    /// Checks every field; throws `SluiceError` (`.invalidOption`) naming the first one
    /// out of range.
    public func validate() throws(SluiceError) {
        func fail(_ message: String, _ input: some CustomStringConvertible) throws(SluiceError) {
            throw SluiceError(code: .invalidOption, message: message, value: input.description)
        }
        if !(0...65535).contains(port) { try fail("port must be 0...65535", port) }
        if !(256...(1 << 20)).contains(maximumHeadBytes) { try fail("maximumHeadBytes must be 256 B to 1 MiB", maximumHeadBytes) }
        if !(0...(1 << 30)).contains(maximumBodyBytes) { try fail("maximumBodyBytes must be 0 to 1 GiB", maximumBodyBytes) }
        for (name, value) in [("headTimeout", headTimeout), ("bodyTimeout", bodyTimeout), ("idleTimeout", idleTimeout)]
        where value < .milliseconds(1) || value > .seconds(86_400) {
            try fail("\(name) must be 1 ms to 1 day", value)
        }
        if !(1...100_000).contains(maximumInFlight) { try fail("maximumInFlight must be 1 to 100000", maximumInFlight) }
        try tcp.validate()
    }
}
