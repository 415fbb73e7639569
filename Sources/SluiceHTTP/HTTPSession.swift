import HTTPTypes
import Sluice
import SluiceCore
import SluiceLibevent

/// One client connection of the HTTP front: routes each request to its codec and the gate —
/// synchronously when the key's loop is this one, with one hop otherwise — and answers `/echo`,
/// `/metrics` and `/healthz` itself. Its requests wait in a gate scope of their own, closed when
/// the connection closes.
public final class HTTPSession: HTTPConnectionHandler, @unchecked Sendable {
    // @unchecked Sendable: completions of requests decided on another loop hop to the
    // connection's loop before touching anything; everything else runs on that loop.

    @usableFromInline let front: HTTPFront
    @usableFromInline let gate: Gate
    @usableFromInline let connection: HTTPConnection
    /// The scope this connection's requests wait in.
    public let scope: GateScope
    private var echoLimit = RateLimitState()

    init(front: HTTPFront, connection: HTTPConnection) {
        self.front = front
        self.gate = front.gate
        self.connection = connection
        self.scope = front.gate.openScope()
        front.connectionOpened()
    }

    public func received(_ request: HTTPServerRequest) {
        front.countRequest()
        let path = request.path
        let method = request.method
        // The front's own paths are at most 8 bytes: a longer path skips their comparisons.
        switch path.utf8.count <= 8 ? path : "" {
        case "/echo":
            guard method == "POST" else { return answer(request, HTTPFront.methodNotAllowed(["POST"])) }
            echo(request)
        case "/healthz":
            guard method == "GET" || method == "HEAD" else { return answer(request, HTTPFront.methodNotAllowed(["GET"])) }
            answer(request, front.health())
        case "/metrics":
            guard method == "GET" || method == "HEAD" else { return answer(request, HTTPFront.methodNotAllowed(["GET"])) }
            let front = self.front
            Task {
                let answer = await front.metrics()
                self.deliver(request) { answer }
            }
        default:
            let match = front.routes.match(method: method, path: path)
            if let route = match.route {
                route.handle(self, request, match.rest)
            } else if !match.allowed.isEmpty {
                answer(request, HTTPFront.methodNotAllowed(match.allowed))
            } else {
                answer(request, HTTPProblem(.notFound, "not-found", detail: "no route for \(method) \(path)").answer)
            }
        }
    }

    public func connectionClosed() {
        gate.close(scope)
        front.connectionClosed()
    }

    // MARK: - Routes

    @inlinable
    func route<Codec: HTTPCodec>(_ request: HTTPServerRequest, rest: Substring, codec: Codec, plugin: PluginHandle<Codec.Plugin>) {
        let input: Codec.Plugin.Input
        do {
            input = try codec.decode(request, rest: rest)
        } catch {
            answer(request, error.answer)
            return
        }
        let gate = self.gate
        let gateRequest = gate.request(plugin, input, in: scope)
        if gateRequest.loop === connection.loop {
            if let outcome = gate.submitNow(gateRequest, later: { self.completion(codec, request, input) }) {
                answer(request, codec.encode(outcome, for: input))
            }
            return
        }
        let completion = self.completion(codec, request, input)
        let accepted = gateRequest.loop.executeIfRunning {
            if let outcome = gate.submitNow(gateRequest, later: { completion }) { completion(outcome) }
        }
        if !accepted { completion(.shuttingDown) }
    }

    /// The completion of a request whose outcome comes later: renders it on this connection's
    /// loop.
    @inlinable
    func completion<Codec: HTTPCodec>(
        _ codec: Codec, _ request: HTTPServerRequest, _ input: Codec.Plugin.Input
    ) -> @Sendable (GateOutcome<Codec.Plugin.Output>) -> Void {
        { outcome in self.deliver(request) { codec.encode(outcome, for: input) } }
    }

    @usableFromInline func deliver(_ request: HTTPServerRequest, _ render: @escaping @Sendable () -> HTTPAnswer) {
        guard connection.loop.inEventLoop else {
            connection.loop.executeIfRunning { self.deliver(request, render) }
            return
        }
        answer(request, render())
    }

    /// Writes `answer` to `request`: its status, fields and body. An answer while the gate is
    /// shutting down also closes the connection (its client should go elsewhere).
    @usableFromInline func answer(_ request: HTTPServerRequest, _ answer: HTTPAnswer) {
        let closing = !gate.isAcceptingRequests
        answer.body.withUnsafeBytes { body in
            request.respond(
                status: answer.status.code, reason: answer.status.reasonPhrase, body: body, closeConnection: closing
            ) { add in
                for field in answer.fields { add(field.name.rawName, field.value) }
            }
        }
    }

    // MARK: - Echo

    private func echo(_ request: HTTPServerRequest) {
        guard gate.isAcceptingRequests else {
            answer(request, HTTPOutcomeMapping.answer(for: GateOutcome<Void>.shuttingDown))
            return
        }
        let decision = echoLimit.check(now: connection.loop.now, options: front.echoOptions)
        guard decision.allowed else {
            answer(request, HTTPOutcomeMapping.limited(decision, limits: front.echoFields))
            return
        }
        let fields: [(name: String, value: String)] = [
            ("Content-Type", "application/octet-stream"),
            (HTTPField.Name.rateLimitPolicy.rawName, front.echoFields.policyValue),
            (HTTPField.Name.rateLimit.rawName, front.echoFields.limitValue(remaining: decision.remaining, reset: decision.resetAfter)),
        ]
        request.withBody { body in
            request.respond(status: 200, reason: "OK", fields: fields, body: body)
        }
    }
}
