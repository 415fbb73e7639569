import HTTPTypes
import Sluice
import SluiceCore
import SluiceFronts
import SluiceLibevent

/// One client connection of the HTTP server: parses its requests with `HTTPRequestParser` in
/// place, routes each to its codec and the gate — synchronously when the key's loop is this one,
/// with one hop otherwise — answers `/echo`, `/metrics` and `/healthz` itself, and writes the
/// answers in the order the requests came (HTTP/1.1 pipelining). Its requests wait in a gate
/// scope of their own, closed when the connection closes.
///
/// Its bounds are the line front's: at most ``HTTPConfiguration/maximumInFlight`` requests
/// whose answers are still to come (reading pauses at the cap), the connection's output
/// watermarks and the process's buffer budget, a head timeout from a head's first byte and a
/// body timeout from its end (408), and a turn. A request the parser refuses is answered with a
/// problem after the answers before it, and the connection closes; so does a request that asks
/// to (`Connection: close`, HTTP/1.0 without keep-alive, `Upgrade`), and any request arriving
/// while the gate drains (503).
public final class HTTPSession: TCPConnectionHandler, @unchecked Sendable {
    // @unchecked Sendable: completions of requests decided on another loop call `deliver`, which
    // hops to the connection's loop before touching any state; everything else runs on that loop.

    @usableFromInline let front: HTTPFront
    @usableFromInline let gate: Gate
    @usableFromInline let connection: TCPConnection
    /// The scope this connection's requests wait in.
    public let scope: GateScope
    /// Everything that changes, behind a pointer (no exclusivity check per access).
    private let state: UnsafeMutablePointer<State>

    private struct State {
        var parser: HTTPRequestParser
        /// The sequence number the next request gets.
        var nextSequence: UInt64 = 0
        /// The sequence number whose answer goes out next.
        var nextToWrite: UInt64 = 0
        /// Answers ready behind one still to come, by sequence number.
        var waiting: [UInt64: (answer: HTTPAnswer, context: HTTPAnswerContext)] = [:]
        /// Requests whose answer has not been written.
        var unanswered = 0
        /// No more requests are read: one asked to close, or was refused.
        var stopped = false
        var pausedAtCap = false
        /// A `/metrics` answer is being made: reading pauses until it is written.
        var pausedForMetrics = false
        /// `100 Continue` was sent for the request being read.
        var continueSent = false
        /// What the connection's frame timer times: a head, a body or nothing.
        var framing = Framing.none
        /// The answer being rendered.
        var out: [UInt8] = []
        var date = HTTPDate()
        /// The per-connection `/echo` limit.
        var echoLimit = RateLimitState()
    }

    private enum Framing {
        case none
        case head
        case body
    }

    init(front: HTTPFront, connection: TCPConnection) {
        self.front = front
        self.gate = front.gate
        self.connection = connection
        self.scope = front.gate.openScope()
        self.state = .allocate(capacity: 1)
        state.initialize(to: State(parser: HTTPRequestParser(limits: front.configuration.http.parserLimits)))
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    // MARK: - TCPConnectionHandler

    public func connectionOpened(_ connection: TCPConnection) {
        front.listener.connectionOpened()
    }

    public func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        gate.close(scope)
        front.listener.connectionClosed()
    }

    public func connectionFrameTimedOut(_ connection: TCPConnection) {
        // A request still being read when the earlier ones are answered gets 408; the
        // connection then closes (the transport closes it once this is written).
        guard state.pointee.unanswered == 0 else { return }
        let problem = HTTPProblem(.requestTimeout, "request-timeout", detail: "the request did not arrive in time")
        write(problem.answer, context: HTTPAnswerContext(isHead: false, close: true, keepAliveHTTP10: false))
    }

    public func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        var completed = false
        let turnEnds = front.configuration.http.turnDuration.map { SluiceLoop.monotonicNow() + $0 }
        var sinceClockCheck = 0
        while offset < bytes.count, !state.pointee.stopped, connection.acceptsInput {
            let window = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            switch state.pointee.parser.parse(window) {
            case .incomplete:
                sendContinueIfAsked()
                timeFrame(partial: true, restart: completed)
                return offset
            case .refused(let problem):
                refuse(problem)
                return bytes.count
            case .request(let parsed):
                offset += parsed.messageLength
                completed = true
                state.pointee.continueSent = false
                handle(HTTPRequestView(message: window, parsed: parsed))
            }
            if let turnEnds {
                sinceClockCheck += 1
                if sinceClockCheck == 8 {
                    sinceClockCheck = 0
                    if SluiceLoop.monotonicNow() >= turnEnds, offset < bytes.count, connection.acceptsInput, !state.pointee.stopped {
                        connection.yieldTurn()
                        break
                    }
                }
            }
        }
        if state.pointee.stopped { return bytes.count }
        timeFrame(partial: offset < bytes.count && connection.acceptsInput, restart: completed)
        return offset
    }

    /// Times the request being read: its head from its first byte, its body from the head's
    /// end.
    private func timeFrame(partial: Bool, restart: Bool) {
        guard partial else {
            state.pointee.framing = .none
            connection.timeFrame(nil)
            return
        }
        let framing: Framing = state.pointee.parser.headIsComplete ? .body : .head
        let http = front.configuration.http
        connection.timeFrame(framing == .body ? http.bodyTimeout : http.headTimeout, restart: restart || framing != state.pointee.framing)
        state.pointee.framing = framing
    }

    /// A request whose head asked for `100 Continue` waits for its body: tell the client to
    /// send it, unless earlier answers are still to come (an interim answer cannot pass them).
    private func sendContinueIfAsked() {
        guard state.pointee.parser.expectsContinue, !state.pointee.continueSent, state.pointee.unanswered == 0 else { return }
        state.pointee.continueSent = true
        let interim: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"
        connection.write(UnsafeRawBufferPointer(start: interim.utf8Start, count: interim.utf8CodeUnitCount))
    }

    /// The parser refused the bytes: the problem is the last answer, and nothing more is read.
    private func refuse(_ problem: HTTPProblem) {
        front.listener.countRequest(at: connection.loop.now)
        state.pointee.stopped = true
        let sequence = nextSequence()
        respond(sequence, problem.answer, HTTPAnswerContext(isHead: false, close: true, keepAliveHTTP10: false))
    }

    // MARK: - Requests

    private func nextSequence() -> UInt64 {
        let sequence = state.pointee.nextSequence
        state.pointee.nextSequence += 1
        state.pointee.unanswered += 1
        if state.pointee.unanswered >= front.configuration.http.maximumInFlight, !state.pointee.pausedAtCap {
            state.pointee.pausedAtCap = true
            connection.pauseReading()
        }
        connection.isAwaitingReplies = true
        return sequence
    }

    private func handle(_ request: HTTPRequestView) {
        front.listener.countRequest(at: connection.loop.now)
        let parsed = request.parsed
        var context = HTTPAnswerContext(
            isHead: parsed.method == .head, close: !parsed.keepAlive,
            keepAliveHTTP10: parsed.version == .http10 && parsed.keepAlive)
        let sequence = nextSequence()
        let path = request.pathBytes
        guard gate.isAcceptingRequests else {
            // Draining: a new request is told to go elsewhere (health says so in its own
            // words), and the connection closes.
            context.close = true
            state.pointee.stopped = true
            let healthCheck = bytesEqual(path, "/healthz") && (request.method == .get || request.method == .head)
            respond(sequence, healthCheck ? front.health() : HTTPOutcomeMapping.answer(for: GateOutcome<Void>.shuttingDown), context)
            return
        }
        if context.close { state.pointee.stopped = true }
        if path.count <= 8 {
            if bytesEqual(path, "/echo") {
                guard request.method == .post else { return respond(sequence, HTTPAnswer.methodNotAllowed(["POST"]), context) }
                return echo(request, sequence, context)
            }
            if bytesEqual(path, "/healthz") {
                guard request.method == .get || request.method == .head else {
                    return respond(sequence, HTTPAnswer.methodNotAllowed(["GET", "HEAD"]), context)
                }
                return respond(sequence, front.health(), context)
            }
            if bytesEqual(path, "/metrics") {
                guard request.method == .get || request.method == .head else {
                    return respond(sequence, HTTPAnswer.methodNotAllowed(["GET", "HEAD"]), context)
                }
                return metrics(sequence, context)
            }
        }
        let pathText = request.path
        let match = front.routes.match(method: request.method.rawValue, path: pathText[...])
        if let route = match.route {
            route.handle(self, request, match.rest, sequence, context)
        } else if !match.allowed.isEmpty {
            respond(sequence, HTTPAnswer.methodNotAllowed(match.allowed), context)
        } else {
            respond(sequence, HTTPAnswer.noRoute(method: request.method, path: pathText), context)
        }
    }

    /// Decodes a plugin route's request and submits it to the gate.
    @inlinable
    func route<Codec: HTTPCodec>(
        _ request: HTTPRequestView, rest: Substring, sequence: UInt64, context: HTTPAnswerContext, codec: Codec,
        plugin: PluginHandle<Codec.Plugin>
    ) {
        let input: Codec.Plugin.Input
        do {
            input = try codec.decode(request, rest: rest)
        } catch {
            respond(sequence, error.answer, context)
            return
        }
        let gate = self.gate
        // Decided here, whichever loop owns the key: an outcome that comes later is rendered
        // on this connection's loop.
        if let outcome = gate.submitNow(gate.request(plugin, input, in: scope), later: { self.completion(codec, input, sequence, context) }) {
            respond(sequence, codec.encode(outcome, for: input), context)
        }
    }

    /// The completion of a request whose outcome comes later: renders it on this connection's
    /// loop.
    @inlinable
    func completion<Codec: HTTPCodec>(
        _ codec: Codec, _ input: Codec.Plugin.Input, _ sequence: UInt64, _ context: HTTPAnswerContext
    ) -> @Sendable (GateOutcome<Codec.Plugin.Output>) -> Void {
        { outcome in self.deliver(sequence, context) { codec.encode(outcome, for: input) } }
    }

    /// Renders and answers request `sequence` on this connection's loop (from any loop).
    @usableFromInline func deliver(_ sequence: UInt64, _ context: HTTPAnswerContext, _ render: @escaping @Sendable () -> HTTPAnswer) {
        guard connection.loop.inEventLoop else {
            connection.loop.executeIfRunning { self.deliver(sequence, context, render) }
            return
        }
        respond(sequence, render(), context)
    }

    // MARK: - Answers

    /// Answers request `sequence`: now, if every earlier request has its answer out; else once
    /// they have.
    @usableFromInline func respond(_ sequence: UInt64, _ answer: HTTPAnswer, _ context: HTTPAnswerContext) {
        guard connection.isOpen else { return }
        guard sequence == state.pointee.nextToWrite else {
            state.pointee.waiting[sequence] = (answer, context)
            return
        }
        writeInOrder(answer, context)
        while let next = state.pointee.waiting.removeValue(forKey: state.pointee.nextToWrite), connection.isOpen {
            writeInOrder(next.answer, next.context)
        }
    }

    private func writeInOrder(_ answer: HTTPAnswer, _ context: HTTPAnswerContext) {
        var context = context
        // The last answer while the gate drains closes the connection: its client should go
        // elsewhere, and a drained server exits.
        if !context.close, !gate.isAcceptingRequests, state.pointee.nextToWrite + 1 == state.pointee.nextSequence {
            context.close = true
            state.pointee.stopped = true
        }
        write(answer, context: context)
        state.pointee.nextToWrite += 1
        answered()
        if context.close { connection.closeAfterFlush() }
    }

    /// One answer was written: below the cap reading resumes; with nothing owed, silence is
    /// idleness again.
    private func answered() {
        state.pointee.unanswered -= 1
        if state.pointee.pausedAtCap, state.pointee.unanswered < front.configuration.http.maximumInFlight {
            state.pointee.pausedAtCap = false
            if !state.pointee.pausedForMetrics { connection.resumeReading() }
        }
        if state.pointee.unanswered == 0 { connection.isAwaitingReplies = false }
    }

    /// Renders `answer` and writes it.
    private func write(_ answer: HTTPAnswer, context: HTTPAnswerContext) {
        state.pointee.date.update()
        state.pointee.out.removeAll(keepingCapacity: true)
        HTTPResponseWriter.render(answer, context: context, date: state.pointee.date.bytes, into: &state.pointee.out)
        flushOut()
    }

    private func flushOut() {
        state.pointee.out.withUnsafeBytes { _ = connection.write($0) }
        // A large answer's buffer is not kept for the connection's life.
        if state.pointee.out.capacity > 4096 { state.pointee.out = [] }
    }

    // MARK: - The front's own paths

    private func echo(_ request: HTTPRequestView, _ sequence: UInt64, _ context: HTTPAnswerContext) {
        let decision = state.pointee.echoLimit.check(now: connection.loop.now, options: front.echoOptions)
        guard decision.allowed else {
            return respond(sequence, HTTPOutcomeMapping.limited(decision, limits: front.echoFields), context)
        }
        var fields = HTTPFields()
        fields[.contentType] = "application/octet-stream"
        fields[.rateLimitPolicy] = front.echoFields.policyValue
        fields[.rateLimit] = front.echoFields.limitValue(remaining: decision.remaining, reset: decision.resetAfter)
        guard sequence == state.pointee.nextToWrite else {
            // Behind an answer still to come: the body is copied to wait with it.
            return respond(sequence, HTTPAnswer(status: .ok, fields: fields, body: request.withBody { Array($0) }), context)
        }
        state.pointee.date.update()
        state.pointee.out.removeAll(keepingCapacity: true)
        request.withBody { body in
            HTTPResponseWriter.render(
                status: .ok, fields: fields, body: body, context: context, date: state.pointee.date.bytes, into: &state.pointee.out)
        }
        flushOut()
        state.pointee.nextToWrite += 1
        answered()
        if context.close { connection.closeAfterFlush() }
    }

    /// `/metrics` is made on another task and can be large: one at a time per connection
    /// (reading pauses until it is written), so a client pipelining it cannot pile them up.
    private func metrics(_ sequence: UInt64, _ context: HTTPAnswerContext) {
        state.pointee.pausedForMetrics = true
        connection.pauseReading()
        let front = self.front
        Task {
            let answer = await front.metrics()
            self.deliver(sequence, context) { answer }
            self.metricsAnswered()
        }
    }

    private func metricsAnswered() {
        guard connection.loop.inEventLoop else {
            connection.loop.executeIfRunning { self.metricsAnswered() }
            return
        }
        state.pointee.pausedForMetrics = false
        if connection.isOpen, !state.pointee.pausedAtCap { connection.resumeReading() }
    }
}
