import SluiceCore
import SluiceLibevent

/// Where a ``GateSession`` writes: a TCP connection, or a test's collector.
///
/// Called on ``loop``'s thread only.
public protocol SessionTransport: AnyObject, Sendable {
    /// The loop the session runs on.
    var loop: EventLoop { get }
    /// A process-unique id for the session.
    var id: UInt64 { get }
    /// Appends reply bytes; returns `false` when the transport is closed.
    @discardableResult
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Closes once everything written so far has been sent.
    func closeAfterFlush()
}

extension TCPConnection: SessionTransport {}

/// One client's side of the line protocol: parses each line, answers `PING` and `ECHO` on the
/// spot, and hands plugin verbs to the shard that owns their key — synchronously when that
/// shard is on this loop, with one hop otherwise.
///
/// Feed it lines on its transport's loop; ``GateServer`` does so for every TCP connection, and
/// ``GateServer/makeSession(transport:)`` lets tests and other transports do the same.
public final class GateSession: TCPConnectionHandler, ReplySink, @unchecked Sendable {
    // @unchecked Sendable: it is the reply sink of the requests it routes, which may reply from
    // another loop; `send(line:)` hops to the transport's loop before touching any state, and
    // everything else runs on that loop.

    private let server: GateServer
    private let connection: any SessionTransport
    /// Requests routed elsewhere whose reply has not been written yet.
    private var outstanding = 0
    /// The peer half-closed: close once the outstanding replies are written.
    private var inputHasEnded = false
    /// The state every line touches, behind a pointer this session owns: reaching it through a
    /// `let` costs no dynamic exclusivity check per access (four or five a line otherwise).
    private let hot: UnsafeMutablePointer<HotState>

    private struct HotState: ~Copyable {
        /// The per-connection `ECHO` limit.
        var echoLimit = RateLimitState()
        /// Reply bytes are assembled here, then written with one call.
        var outgoing = ReplyBuilder()
    }

    init(server: GateServer, connection: any SessionTransport) {
        self.server = server
        self.connection = connection
        self.hot = .allocate(capacity: 1)
        hot.initialize(to: HotState())
    }

    deinit {
        hot.deinitialize(count: 1)
        hot.deallocate()
    }

    // MARK: - Input

    /// The session opened (counted in `STATS` as a connection).
    public func opened() {
        server.connectionOpened()
    }

    /// The client will send nothing more: close once the pending replies are written.
    public func inputEnded() {
        inputHasEnded = true
        if outstanding == 0 { connection.closeAfterFlush() }
    }

    /// The session closed: its connection-scoped effects are cancelled.
    public func closed() {
        server.connectionClosed(connection.id)
    }

    /// A line longer than the maximum arrived.
    public func receivedOverlongLine() {
        send(Self.lineTooLong)
    }

    /// Writes the reply of a routed request (from any loop).
    public func send(line: String) {
        guard connection.loop.inEventLoop else {
            connection.loop.executeIfRunning { self.send(line: line) }
            return
        }
        var text = line + "\n"
        text.withUTF8 { _ = connection.write(UnsafeRawBufferPointer($0)) }
        outstanding -= 1
        if inputHasEnded && outstanding == 0 { connection.closeAfterFlush() }
    }

    /// Handles one request line (without its LF).
    public func received(line: UnsafeRawBufferPointer) {
        server.countRequest()
        let parsed: RequestLine.Parsed
        switch RequestLine.parse(line) {
        case .success(let value):
            parsed = value
        case .failure(.malformed):
            send(Self.malformed)
            return
        case .failure(.missingVerb(let id)):
            reply(line, id: id, Self.unknownVerb)
            return
        }
        if server.isDraining {
            reply(line, id: parsed.id, Self.shuttingDown)
            return
        }
        let verb = parsed.verb
        if RequestLine.verb(line, verb, is: "ECHO") {
            echo(line, parsed)
        } else if RequestLine.verb(line, verb, is: "PING") {
            reply(line, id: parsed.id, parsed.arguments == nil ? Self.pong : Self.usagePing)
        } else if RequestLine.verb(line, verb, is: "CANCEL") {
            cancel(line, parsed)
        } else if RequestLine.verb(line, verb, is: "STATS") {
            stats(line, parsed)
        } else if let plugin = server.plugins.first(where: { RequestLine.verb(line, verb, matches: $0.verb) }) {
            route(line, parsed, to: plugin)
        } else {
            reply(line, id: parsed.id, Self.unknownVerb)
        }
    }

    // MARK: - Verbs answered here

    private func echo(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) {
        guard let text = parsed.arguments, !text.isEmpty else {
            reply(line, id: parsed.id, Self.usageEcho)
            return
        }
        if let wait = hot.pointee.echoLimit.admit(now: connection.loop.now, options: server.echoLimit) {
            replyText(line, id: parsed.id, "LIMITED retry-after-ms=\(wait.wholeMillisecondsRoundedUp)")
            return
        }
        hot.pointee.outgoing.reset()
        hot.pointee.outgoing.append(UnsafeRawBufferPointer(rebasing: line[parsed.id]))
        hot.pointee.outgoing.append(" OK ")
        hot.pointee.outgoing.append(UnsafeRawBufferPointer(rebasing: line[text]))
        hot.pointee.outgoing.append(byte: 0x0A)
        connection.write(hot.pointee.outgoing.bytes)
    }

    private func cancel(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) {
        let arguments = parsed.arguments.map { RequestLine.string(line, $0)[...] } ?? ""
        guard let fields = RequestLine.fields(arguments, count: 2), let key = RequestLine.key(fields[0]) else {
            reply(line, id: parsed.id, Self.usageCancel)
            return
        }
        let kind = fields[1].lowercased()
        let effectIDs: [String]?
        if kind == "all" {
            effectIDs = nil
        } else if server.plugins.contains(where: { $0.name == kind && $0.isCancellable }) {
            effectIDs = [kind]
        } else {
            reply(line, id: parsed.id, Self.usageCancel)
            return
        }
        let requester = requester(line, parsed)
        let shard = server.shard(for: key)
        onShard(shard) { shard in
            let count = shard.cancel(key: key, effectIDs: effectIDs)
            requester.reply("OK cancelled=\(count)")
        }
    }

    private func stats(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) {
        guard parsed.arguments == nil else {
            reply(line, id: parsed.id, Self.usageStats)
            return
        }
        let requester = requester(line, parsed)
        let server = self.server
        Task.immediate(executorPreference: connection.loop) {
            requester.reply("OK " + (await server.statisticsLine()))
        }
    }

    // MARK: - Plugin verbs

    private func route(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed, to plugin: RegisteredPlugin) {
        let arguments = parsed.arguments.map { RequestLine.string(line, $0)[...] } ?? ""
        let prepared: PreparedRequest
        do {
            prepared = try plugin.prepare(arguments)
        } catch {
            replyText(line, id: parsed.id, error.code.map { "ERR \($0)" } ?? "ERR usage \(plugin.verb)")
            return
        }
        let request = GateRequest(plugin: plugin, prepared: prepared, requester: requester(line, parsed))
        onShard(server.shard(for: prepared.key)) { $0.submit(request) }
    }

    /// Runs `body` isolated to `shard`: at once when the shard is on this loop, else after one
    /// hop to its loop.
    private func onShard(_ shard: GateShard, _ body: @escaping @Sendable (isolated GateShard) -> Void) {
        if shard.loop === connection.loop {
            shard.assumeIsolated(body)
        } else {
            shard.loop.execute { shard.assumeIsolated(body) }
        }
    }

    /// The requester of a request whose reply comes later, through ``send(line:)``.
    private func requester(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) -> Requester {
        outstanding += 1
        return Requester(sink: self, requestID: RequestLine.string(line, parsed.id), connectionID: connection.id)
    }

    // MARK: - Writing

    private func send(_ text: StaticString) {
        connection.write(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Writes `<id> <status>\n` where `status` already ends with its LF.
    private func reply(_ line: UnsafeRawBufferPointer, id: Range<Int>, _ status: StaticString) {
        hot.pointee.outgoing.reset()
        hot.pointee.outgoing.append(UnsafeRawBufferPointer(rebasing: line[id]))
        hot.pointee.outgoing.append(byte: 0x20)
        hot.pointee.outgoing.append(status)
        connection.write(hot.pointee.outgoing.bytes)
    }

    private func replyText(_ line: UnsafeRawBufferPointer, id: Range<Int>, _ status: String) {
        var status = status
        hot.pointee.outgoing.reset()
        hot.pointee.outgoing.append(UnsafeRawBufferPointer(rebasing: line[id]))
        hot.pointee.outgoing.append(byte: 0x20)
        status.withUTF8 { hot.pointee.outgoing.append(UnsafeRawBufferPointer($0)) }
        hot.pointee.outgoing.append(byte: 0x0A)
        connection.write(hot.pointee.outgoing.bytes)
    }

    private static let pong: StaticString = "PONG\n"
    private static let malformed: StaticString = "- ERR malformed\n"
    private static let lineTooLong: StaticString = "- ERR line-too-long\n"
    private static let unknownVerb: StaticString = "ERR unknown-verb\n"
    private static let shuttingDown: StaticString = "ERR shutting-down\n"
    private static let usagePing: StaticString = "ERR usage PING\n"
    private static let usageEcho: StaticString = "ERR usage ECHO\n"
    private static let usageCancel: StaticString = "ERR usage CANCEL\n"
    private static let usageStats: StaticString = "ERR usage STATS\n"
}

// MARK: - As a TCP connection's handler

extension GateSession {
    public func connectionOpened(_ connection: TCPConnection) { opened() }
    public func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) { received(line: line) }
    public func connectionReceivedOverlongLine(_ connection: TCPConnection) { receivedOverlongLine() }
    public func connectionInputEnded(_ connection: TCPConnection) { inputEnded() }
    public func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) { closed() }
}
