import Logging
import Sluice
import SluiceFronts

/// Where a ``LineSession`` writes: a TCP connection, or a test's collector.
///
/// Called on ``loop``'s thread only.
public protocol SessionTransport: AnyObject, Sendable {
    /// The loop the session runs on.
    var loop: SluiceLoop { get }
    /// A process-unique id for the session.
    var id: UInt64 { get }
    /// Appends reply bytes; returns `false` when the transport is closed.
    @discardableResult
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Closes once everything written so far has been sent.
    func closeAfterFlush()
    /// Stops handing lines over until ``resumeReading()``.
    func pauseReading()
    /// Hands lines over again (never from inside this call).
    func resumeReading()
}

extension SessionTransport {
    /// A transport fed by hand has nothing to pause.
    public func pauseReading() {}
    /// A transport fed by hand has nothing to resume.
    public func resumeReading() {}
}

extension TCPConnection: SessionTransport {}

/// One client's side of the line protocol: parses each line, answers `PING` and `ECHO` on the
/// spot, and hands plugin verbs to the gate through their codecs — synchronously when the key's
/// loop is this one, with one hop otherwise. Its requests wait in a gate scope of their own,
/// closed (cancelling what still waits in it) when the session closes.
///
/// Feed it lines on its transport's loop; ``LineServer`` does so for every TCP connection, and
/// ``LineServer/makeSession(transport:)`` lets tests and other transports do the same.
public final class LineSession: TCPLineHandler, @unchecked Sendable {
    // @unchecked Sendable: completions of requests decided on another loop call `deliver`, which
    // hops to the transport's loop before touching any state; everything else runs on that loop.

    private let server: LineServer
    @usableFromInline let gate: Gate
    @usableFromInline let connection: any SessionTransport
    /// The scope this session's requests wait in.
    public let scope: GateScope
    /// Requests whose reply has not been written yet.
    private var outstanding = 0
    /// Reading is paused because `outstanding` reached the cap.
    private var pausedAtCap = false
    /// The peer half-closed: close once the outstanding replies are written.
    private var inputHasEnded = false
    /// The state every line touches, behind pointers this session owns: reaching it through a
    /// `let` costs no dynamic exclusivity check per access (four or five a line otherwise).
    /// The per-connection `ECHO` limit.
    private let echoLimit: UnsafeMutablePointer<RateLimitState>
    /// Reply bytes are assembled here, then written with one call.
    @usableFromInline let outgoing: UnsafeMutablePointer<ReplyBuilder>
    /// Where the status of the reply being assembled starts (after `<id> `).
    private var statusStart = 0

    init(server: LineServer, connection: any SessionTransport) {
        self.server = server
        self.gate = server.gate
        self.connection = connection
        self.scope = server.gate.openScope()
        self.echoLimit = .allocate(capacity: 1)
        echoLimit.initialize(to: RateLimitState())
        self.outgoing = .allocate(capacity: 1)
        outgoing.initialize(to: ReplyBuilder())
    }

    deinit {
        echoLimit.deinitialize(count: 1)
        echoLimit.deallocate()
        outgoing.deinitialize(count: 1)
        outgoing.deallocate()
    }

    // MARK: - Input

    /// The session opened (counted in `STATS` as a connection).
    public func opened() {
        server.listener.connectionOpened()
    }

    /// The client will send nothing more: close once the pending replies are written.
    public func inputEnded() {
        inputHasEnded = true
        if outstanding == 0 { connection.closeAfterFlush() }
    }

    /// The session closed: its scope closes, so what its requests still wait for is cancelled
    /// (idempotent executions, which live in the key's scope, run on).
    public func closed() {
        gate.close(scope)
        server.listener.connectionClosed()
    }

    /// A line longer than the maximum arrived.
    public func receivedOverlongLine() {
        send(Self.lineTooLong)
    }

    /// A line did not complete in time; the connection closes after this reply.
    public func lineTimedOut() {
        send(Self.lineTimeout)
    }

    /// One more request whose reply comes later; at the cap, reading pauses.
    @usableFromInline func replyPending() {
        outstanding += 1
        if outstanding >= server.configuration.maximumInFlight, !pausedAtCap {
            pausedAtCap = true
            connection.pauseReading()
        }
    }

    /// A reply that came later was written; below the cap, reading resumes.
    private func replyDelivered() {
        outstanding -= 1
        if pausedAtCap, outstanding < server.configuration.maximumInFlight {
            pausedAtCap = false
            connection.resumeReading()
        }
        if inputHasEnded && outstanding == 0 { connection.closeAfterFlush() }
    }

    /// Handles one request line (without its LF).
    public func received(line: UnsafeRawBufferPointer) {
        server.listener.countRequest(at: connection.loop.now)
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
        guard gate.isAcceptingRequests else {
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
        } else if let route = server.verbs.routes.first(where: { RequestLine.verb(line, verb, matches: $0.verb) }) {
            route.handle(self, line, parsed)
        } else {
            reply(line, id: parsed.id, Self.unknownVerb)
        }
    }

    // MARK: - Verbs answered here

    private func echo(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) {
        // A CR inside the text would be written back inside the reply, where a client that
        // also ends lines at a CR would read a line the server never wrote.
        guard let text = parsed.arguments, !text.isEmpty, !line[text].contains(0x0D) else {
            reply(line, id: parsed.id, Self.usageEcho)
            return
        }
        if let wait = echoLimit.pointee.admit(now: connection.loop.now, options: server.echoLimit) {
            begin(line, id: parsed.id)
            var reply = LineReply(outgoing)
            reply.append("LIMITED retry-after-ms=")
            reply.append(milliseconds: wait)
            finish(reply)
            return
        }
        outgoing.pointee.reset()
        outgoing.pointee.append(UnsafeRawBufferPointer(rebasing: line[parsed.id]))
        outgoing.pointee.append(" OK ")
        outgoing.pointee.append(UnsafeRawBufferPointer(rebasing: line[text]))
        outgoing.pointee.append(byte: 0x0A)
        connection.write(outgoing.pointee.bytes)
    }

    private func cancel(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) {
        let arguments = parsed.arguments.map { RequestLine.string(line, $0)[...] } ?? ""
        guard let fields = RequestLine.fields(arguments, count: 2), let key = RequestLine.key(fields[0]) else {
            reply(line, id: parsed.id, Self.usageCancel)
            return
        }
        let kind = fields[1].lowercased()
        let effectID: EffectID?
        if kind == "all" {
            effectID = nil
        } else if server.verbs.routes.contains(where: { $0.name == kind && $0.isCancellable }) {
            effectID = EffectID(kind)
        } else {
            reply(line, id: parsed.id, Self.usageCancel)
            return
        }
        let gate = self.gate
        if gate.loop(forKey: key) === connection.loop {
            let count = gate.cancelNow(id: effectID, key: key)
            replyCancelled(line, id: parsed.id, count)
            return
        }
        replyPending()
        let id = RequestLine.string(line, parsed.id)
        Task.immediate(executorPreference: connection.loop) {
            let count = await gate.cancel(id: effectID, key: key)
            self.deliver(id: id) { $0.append("OK cancelled="); $0.append(count) }
        }
    }

    private func stats(_ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed) {
        guard parsed.arguments == nil else {
            reply(line, id: parsed.id, Self.usageStats)
            return
        }
        replyPending()
        let id = RequestLine.string(line, parsed.id)
        let server = self.server
        Task.immediate(executorPreference: connection.loop) {
            let text = await server.statisticsLine()
            self.deliver(id: id) { $0.append("OK "); $0.append(text) }
        }
    }

    // MARK: - Plugin verbs

    /// Decodes a plugin verb's arguments and submits the request to the gate.
    @inlinable
    func route<Codec: LineCodec>(
        _ line: UnsafeRawBufferPointer, _ parsed: RequestLine.Parsed, codec: Codec, plugin: PluginHandle<Codec.Plugin>
    ) {
        let arguments = parsed.arguments.map { RequestLine.string(line, $0)[...] } ?? ""
        let input: Codec.Plugin.Input
        do {
            input = try codec.decode(arguments)
        } catch {
            begin(line, id: parsed.id)
            var reply = LineReply(outgoing)
            if let code = error.code {
                reply.append("ERR ")
                reply.append(code)
            } else {
                reply.append("ERR usage ")
                reply.append(codec.verb.uppercased())
            }
            finish(reply)
            return
        }
        let gate = self.gate
        // Decided here, whichever loop owns the key: an outcome that comes later is rendered
        // on this connection's loop. The completion (and the id's copy) is made only for an
        // outcome that comes later; `submitNow` calls `later` before it returns, while the
        // line's bytes are valid.
        nonisolated(unsafe) let idBytes = UnsafeRawBufferPointer(rebasing: line[parsed.id])
        if let outcome = gate.submitNow(gate.request(plugin, input, in: scope), later: {
            self.completion(codec, id: String(decoding: idBytes, as: UTF8.self))
        }) {
            begin(line, id: parsed.id)
            var reply = LineReply(outgoing)
            codec.encode(outcome, into: &reply)
            finish(reply)
        } else {
            replyPending()
        }
    }

    /// The completion of a request whose outcome comes later: renders it with `codec` on this
    /// session's loop.
    @inlinable
    func completion<Codec: LineCodec>(_ codec: Codec, id: String) -> @Sendable (GateOutcome<Codec.Plugin.Output>) -> Void {
        { outcome in self.deliver(id: id) { codec.encode(outcome, into: &$0) } }
    }

    /// Writes the reply to `id` of a request answered later (from any loop).
    @usableFromInline func deliver(id: String, _ render: @escaping @Sendable (inout LineReply) -> Void) {
        guard connection.loop.inEventLoop else {
            connection.loop.executeIfRunning { self.deliver(id: id, render) }
            return
        }
        var id = id
        outgoing.pointee.reset()
        id.withUTF8 { outgoing.pointee.append(UnsafeRawBufferPointer($0)) }
        outgoing.pointee.append(byte: 0x20)
        statusStart = outgoing.pointee.count
        var reply = LineReply(outgoing)
        render(&reply)
        finish(reply)
        replyDelivered()
    }

    // MARK: - Writing

    private func send(_ text: StaticString) {
        connection.write(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Starts a reply: `<id> `.
    @usableFromInline func begin(_ line: UnsafeRawBufferPointer, id: Range<Int>) {
        outgoing.pointee.reset()
        outgoing.pointee.append(UnsafeRawBufferPointer(rebasing: line[id]))
        outgoing.pointee.append(byte: 0x20)
        statusStart = outgoing.pointee.count
    }

    /// Ends a reply started with `begin` and writes it; a reply the codec could not write
    /// (it held a CR or an LF) becomes `<id> ERR bad-reply`.
    @usableFromInline func finish(_ reply: consuming LineReply) {
        if reply.isInvalid {
            server.logger.warning("a codec wrote a reply holding a CR or an LF; answered ERR bad-reply")
            outgoing.pointee.truncate(to: statusStart)
            outgoing.pointee.append("ERR bad-reply")
        }
        outgoing.pointee.append(byte: 0x0A)
        connection.write(outgoing.pointee.bytes)
    }

    /// Writes `<id> <status>\n` where `status` already ends with its LF.
    private func reply(_ line: UnsafeRawBufferPointer, id: Range<Int>, _ status: StaticString) {
        outgoing.pointee.reset()
        outgoing.pointee.append(UnsafeRawBufferPointer(rebasing: line[id]))
        outgoing.pointee.append(byte: 0x20)
        outgoing.pointee.append(status)
        connection.write(outgoing.pointee.bytes)
    }

    private func replyCancelled(_ line: UnsafeRawBufferPointer, id: Range<Int>, _ count: Int) {
        begin(line, id: id)
        var reply = LineReply(outgoing)
        reply.append("OK cancelled=")
        reply.append(count)
        finish(reply)
    }

    private static let pong: StaticString = "PONG\n"
    private static let malformed: StaticString = "- ERR malformed\n"
    private static let lineTooLong: StaticString = "- ERR line-too-long\n"
    private static let lineTimeout: StaticString = "- ERR line-timeout\n"
    private static let unknownVerb: StaticString = "ERR unknown-verb\n"
    private static let shuttingDown: StaticString = "ERR shutting-down\n"
    private static let usagePing: StaticString = "ERR usage PING\n"
    private static let usageEcho: StaticString = "ERR usage ECHO\n"
    private static let usageCancel: StaticString = "ERR usage CANCEL\n"
    private static let usageStats: StaticString = "ERR usage STATS\n"
}

// MARK: - As a TCP connection's handler

extension LineSession {
    public func connectionOpened(_ connection: TCPConnection) { opened() }
    public func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) { received(line: line) }
    public func connectionReceivedOverlongLine(_ connection: TCPConnection) { receivedOverlongLine() }
    public func connectionInputEnded(_ connection: TCPConnection) { inputEnded() }
    public func connectionLineTimedOut(_ connection: TCPConnection) { lineTimedOut() }
    public func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) { closed() }
}
