/// How an ``HTTPServer`` listens and what it accepts from a client.
public struct HTTPConfiguration: Sendable, Hashable {
    /// The address to bind: an IPv4 or IPv6 literal, or `localhost`.
    public var host: String
    /// The port to bind; 0 picks a free port (every loop then shares the first loop's port).
    public var port: Int
    /// The largest request head (request line and header fields, line ends included) accepted;
    /// a larger one is answered 431 as soon as its bytes show it, and the connection closes.
    public var maximumHeadBytes: Int
    /// The largest request body accepted; a larger one is answered 413 as soon as the head
    /// announces it (libevent's `evhttp` refuses it before reading it).
    public var maximumBodyBytes: Int
    /// How long a request head may take from its first byte; past it the client gets 408 and
    /// the connection closes.
    public var headTimeout: Duration
    /// How long a request body may take once its head is complete; past it, 408 and close.
    public var bodyTimeout: Duration
    /// How long a connection may stay silent (or leave a reply unread) between requests before
    /// it is closed.
    public var idleTimeout: Duration
    /// Open connections allowed when the server makes its own accounting (see
    /// ``HTTPServer/bind(group:configuration:accounting:logger:makeHandler:)``); `nil` for no cap.
    public var maximumConnections: Int?
    /// The listen backlog.
    public var backlog: Int

    /// A configuration with the defaults of `sluice-echo`.
    public init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        maximumHeadBytes: Int = 16 << 10,
        maximumBodyBytes: Int = 1 << 20,
        headTimeout: Duration = .seconds(10),
        bodyTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(60),
        maximumConnections: Int? = 10_000,
        backlog: Int = 1024
    ) {
        self.host = host
        self.port = port
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumBodyBytes = maximumBodyBytes
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
        self.maximumConnections = maximumConnections
        self.backlog = backlog
    }

    /// Checks every field; throws ``EventLoopError`` with code `.invalidArgument` naming the
    /// first field that is out of range.
    public func validate() throws(EventLoopError) {
        func fail(_ message: String, _ input: some CustomStringConvertible) throws(EventLoopError) {
            throw EventLoopError(code: .invalidArgument, message: message, input: input.description)
        }
        if !(0...65535).contains(port) { try fail("port must be 0...65535", port) }
        if !(256...(1 << 20)).contains(maximumHeadBytes) { try fail("maximumHeadBytes must be 256 B to 1 MiB", maximumHeadBytes) }
        if !(0...(1 << 30)).contains(maximumBodyBytes) { try fail("maximumBodyBytes must be 0 to 1 GiB", maximumBodyBytes) }
        for (name, value) in [("headTimeout", headTimeout), ("bodyTimeout", bodyTimeout), ("idleTimeout", idleTimeout)]
        where value < .milliseconds(1) || value > .seconds(86_400) {
            try fail("\(name) must be 1 ms to 1 day", value)
        }
        if let maximumConnections, maximumConnections < 1 { try fail("maximumConnections must be at least 1", maximumConnections) }
        if backlog < 1 { try fail("backlog must be at least 1", backlog) }
    }
}
