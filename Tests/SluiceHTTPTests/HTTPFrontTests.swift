import HTTPTypes
import RawStructuredFieldValues
import Sluice
import SluiceBuiltInCodecs
import SluiceButtonTap
import SluiceCore
import SluiceHTTP
import SluicePage
import SluicePayment
import SluicePluginTesting
import SluiceRateLimit
import SluiceSearch
import SluiceTestSupport
import Testing

/// The HTTP front of a sluice-echo-like server on real sockets, two loops, plugins on a manual
/// clock.
struct HTTPTestServer {
    let port: Int
    let clock: ManualGateClock
    let gate: Gate
    let front: HTTPFront

    func client() throws -> HTTPTestClient { try HTTPTestClient(port: port) }
}

func withHTTPServer(
    loops: Int = 2,
    loopClock: ManualLoopClock? = nil,
    configure: (inout HTTPFrontConfiguration) -> Void = { _ in },
    payConcurrent: IdempotencyOptions.Concurrent = .reject,
    accounting: ConnectionAccounting? = nil,
    _ body: (HTTPTestServer) async throws -> Void
) async throws {
    let group = try SluiceLoopGroup(loopCount: loops, namePrefix: "http", clock: loopClock)
    let clock = ManualGateClock()
    var configuration = HTTPFrontConfiguration(http: HTTPConfiguration(port: 0))
    // The real-time limits stretched as the tests' own deadlines are (4 times under a
    // sanitizer): a test task kept from running for a while by CPU-bound tests beside it must
    // not find its connection closed. Tests of the limits set their own.
    configuration.http.headTimeout *= deadlineScale
    configuration.http.bodyTimeout *= deadlineScale
    configuration.http.idleTimeout *= deadlineScale
    configure(&configuration)
    var plugins = PluginRegistry()
    var routes = HTTPRoutes()
    let tap = try plugins.register(ButtonTapPlugin(window: .milliseconds(1500)))
    try routes.register(TapHTTPCodec(tap.plugin), for: tap)
    let pay = try plugins.register(
        PaymentPlugin(retention: .seconds(60), processor: SimulatedProcessor(latency: .milliseconds(20), declineAtOrAbove: 1_000_000)))
    try routes.register(PayHTTPCodec(pay.plugin, concurrent: payConcurrent), for: pay)
    let search = try plugins.register(SearchPlugin(quiet: .milliseconds(100), maxWait: .milliseconds(1000), latency: .milliseconds(30)))
    try routes.register(SearchHTTPCodec(search.plugin), for: search)
    let limit = try plugins.register(RateLimitPlugin(count: 10, per: .seconds(1), burst: 2))
    try routes.register(LimitHTTPCodec(limit.plugin), for: limit)
    let page = try plugins.register(PagePlugin(latency: .milliseconds(40), pageSize: 2))
    try routes.register(PageHTTPCodec(page.plugin), for: page)
    let gate = try Gate(group: group, plugins: plugins, options: GateOptions(shutdownGracePeriod: .zero), clock: clock.clock(for:))
    let front = try HTTPFront(
        gate: gate, routes: routes, configuration: configuration, accounting: accounting,
        metrics: { Array("# metrics\nsluice_test_total 1\n".utf8) })
    do {
        let port = try await front.start()
        try await body(HTTPTestServer(port: port, clock: clock, gate: gate, front: front))
    } catch {
        group.shutdownGracefully()
        clock.cancelAll()
        throw error
    }
    group.shutdownGracefully()
    clock.cancelAll()
}

/// A draft-11 field value parsed as a structured-field list of one item: its string name and
/// its integer parameters.
func rateLimitItem(_ value: String?) throws -> (name: String, parameters: [String: Int]) {
    var parser = StructuredFieldValueParser(Array((value ?? "").utf8))
    let list = try parser.parseListFieldValue()
    guard list.count == 1, case .item(let item) = list[0], case .string(let name) = item.rfc9651BareItem else {
        throw LineClient.Failure(description: "not a list of one string item: \(value ?? "nil")")
    }
    var parameters: [String: Int] = [:]
    for (key, parameter) in item.rfc9651Parameters {
        guard case .integer(let number) = parameter else { throw LineClient.Failure(description: "\(key) is not an integer") }
        parameters[key] = Int(number)
    }
    return (name, parameters)
}

func problem(_ response: HTTPTestClient.Response) -> [String: String] {
    // The problem bodies are flat objects of strings and one number: enough to read them back.
    var members: [String: String] = [:]
    let text = response.text.dropFirst().dropLast()
    var rest = Substring(text)
    while let keyStart = rest.firstIndex(of: "\"") {
        rest = rest[rest.index(after: keyStart)...]
        guard let keyEnd = rest.firstIndex(of: "\"") else { break }
        let key = String(rest[..<keyEnd])
        rest = rest[rest.index(keyEnd, offsetBy: 2)...]
        if rest.first == "\"" {
            var value = ""
            var index = rest.index(after: rest.startIndex)
            while index < rest.endIndex, rest[index] != "\"" {
                if rest[index] == "\\" { index = rest.index(after: index) }
                value.append(rest[index])
                index = rest.index(after: index)
            }
            members[key] = value
            rest = rest[rest.index(after: index)...]
        } else {
            let end = rest.firstIndex(of: ",") ?? rest.endIndex
            members[key] = String(rest[..<end])
            rest = rest[end...]
        }
    }
    return members
}

func expectProblem(_ response: HTTPTestClient.Response, _ status: Int, _ slug: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response.status == status, "\(response)", sourceLocation: sourceLocation)
    #expect(response.field("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
    let members = problem(response)
    #expect(members["type"] == "urn:sluice:problem:\(slug)", "\(response.text)", sourceLocation: sourceLocation)
    #expect(members["status"] == String(status), sourceLocation: sourceLocation)
    #expect(members["title"] == response.reason && !response.reason.isEmpty, sourceLocation: sourceLocation)
    #expect(members["detail"]?.isEmpty == false, sourceLocation: sourceLocation)
}

func payRequest(_ client: HTTPTestClient, key: String = "u1", idem: String?, amount: String = "100") async throws -> HTTPTestClient.Response {
    var fields: [(String, String)] = []
    if let idem { fields.append(("Idempotency-Key", idem)) }
    return try await client.request("POST", "/pay", fields: fields, body: #"{"key":"\#(key)","amount":\#(amount)}"#)
}

@Suite struct HTTPFrontTests {
    @Test func tapAnswers200Then429WithTheDraft11Fields() async throws {
        try await withHTTPServer { server in
            let client = try server.client()
            let first = try await client.request("POST", "/tap/user42")
            #expect(first.status == 200)
            #expect(first.field("Content-Type") == "application/json")
            #expect(first.text == #"{"tap":1}"#)
            #expect(first.field("RateLimit-Policy") == #""tap";q=1;w=2"#)
            #expect(first.field("RateLimit") == #""tap";r=0;t=2"#)
            #expect(first.field("Retry-After") == nil)

            await server.clock.advance(by: .milliseconds(200))
            let second = try await client.request("POST", "/tap/user42")
            expectProblem(second, 429, "throttled")
            // 1.3 s left, rounded up.
            #expect(second.field("Retry-After") == "2")
            #expect(second.field("RateLimit-Policy") == #""tap";q=1;w=2"#)
            #expect(second.field("RateLimit") == #""tap";r=0;t=2"#)
            let policy = try rateLimitItem(second.field("RateLimit-Policy"))
            #expect(policy.name == "tap" && policy.parameters == ["q": 1, "w": 2])
            let limit = try rateLimitItem(second.field("RateLimit"))
            #expect(limit.name == "tap" && limit.parameters == ["r": 0, "t": 2])

            await server.clock.advance(by: .milliseconds(1100))
            let third = try await client.request("POST", "/tap/user42")
            #expect(third.field("Retry-After") == "1")
            await server.clock.advance(by: .milliseconds(200))
            #expect(try await client.request("POST", "/tap/user42").text == #"{"tap":2}"#)
            // Another key has its own window; a percent-encoded key is decoded.
            #expect(try await client.request("POST", "/tap/%41b").text == #"{"tap":1}"#)
            #expect(try await client.request("POST", "/tap/Ab").status == 429)
        }
    }

    @Test func limitCarriesRateLimitOnEveryAnswer() async throws {
        try await withHTTPServer { server in
            let client = try server.client()
            // 10 per second, burst 2: a limit of 3; an empty bucket fills in 300 ms (w=1).
            for remaining in [2, 1, 0] {
                let answer = try await client.request("POST", "/limit/k")
                #expect(answer.status == 200)
                #expect(answer.field("RateLimit-Policy") == #""limit";q=3;w=1"#)
                let fields = try rateLimitItem(answer.field("RateLimit"))
                #expect(fields.name == "limit" && fields.parameters["r"] == remaining)
                #expect(answer.text.hasPrefix(#"{"limit":3,"remaining":\#(remaining),"reset_ms":"#))
            }
            let refused = try await client.request("POST", "/limit/k")
            expectProblem(refused, 429, "limited")
            #expect(refused.field("Retry-After") == "1")
            #expect(refused.field("RateLimit-Policy") == #""limit";q=3;w=1"#)
            #expect(refused.field("RateLimit") == #""limit";r=0;t=1"#)

            let costly = try await client.request("POST", "/limit/other?cost=3")
            #expect(costly.status == 200 && costly.text.hasPrefix(#"{"limit":3,"remaining":0,"#))
            expectProblem(try await client.request("POST", "/limit/other2?cost=4"), 400, "bad-cost")
            expectProblem(try await client.request("POST", "/limit/other2?cost=x"), 400, "bad-cost")
        }
    }

    @Test func payRunsOnceRefusesADuplicateInFlightAndReplaysAfter() async throws {
        try await withHTTPServer { server in
            let first = try server.client()
            let second = try server.client()
            try first.send(
                "POST", "/pay", fields: [("Idempotency-Key", #""order-1""#)], body: #"{"key":"u1","amount":100}"#)
            try await pollUntil { await server.gate.statistics().executions == 1 }
            // The processor sleeps on the manual clock: the first payment is in flight.
            let duplicate = try await payRequest(second, idem: #""order-1""#)
            expectProblem(duplicate, 409, "conflict")
            #expect(duplicate.field("Idempotent-Replayed") == nil)

            await server.clock.advance(by: .milliseconds(20))
            let created = try await first.readResponse()
            #expect(created.status == 201)
            #expect(created.field("Content-Type") == "application/json")
            #expect(created.field("Idempotent-Replayed") == nil)
            #expect(created.text.hasPrefix(#"{"charge":"ch_"#) && created.text.hasSuffix(#","amount":100}"#))

            let replay = try await payRequest(second, idem: #""order-1""#)
            #expect(replay.status == 201)
            #expect(replay.field("Idempotent-Replayed") == "true")
            #expect(replay.body == created.body)

            // The same key with another amount; the same Idempotency-Key for another account is
            // another payment.
            expectProblem(try await payRequest(second, idem: #""order-1""#, amount: "101"), 422, "mismatch")
            try second.send("POST", "/pay", fields: [("Idempotency-Key", #""order-1""#)], body: #"{"key":"u2","amount":100}"#)
            try await pollUntil { await server.gate.statistics().executions == 1 }
            await server.clock.advance(by: .milliseconds(20))
            let separate = try await second.readResponse()
            #expect(separate.status == 201 && separate.field("Idempotent-Replayed") == nil)
        }
    }

    @Test func aDeclineIsStoredAndReplayedAs402() async throws {
        try await withHTTPServer { server in
            let client = try server.client()
            try client.send("POST", "/pay", fields: [("Idempotency-Key", "bare-token-7")], body: #"{"key":"u1","amount":2000000}"#)
            try await pollUntil { await server.gate.statistics().executions == 1 }
            await server.clock.advance(by: .milliseconds(20))
            let declined = try await client.readResponse()
            expectProblem(declined, 402, "payment-declined")
            #expect(problem(declined)["reason"] == "amount-limit")
            let replay = try await payRequest(client, idem: #""bare-token-7""#, amount: "2000000")
            #expect(replay.status == 402 && replay.body == declined.body)
            #expect(replay.field("Idempotent-Replayed") == "true")
        }
    }

    @Test func aDuplicateJoinsTheFirstWhenDuplicatesJoin() async throws {
        try await withHTTPServer(payConcurrent: .join) { server in
            let first = try server.client()
            let second = try server.client()
            try first.send("POST", "/pay", fields: [("Idempotency-Key", #""j""#)], body: #"{"key":"u1","amount":5}"#)
            try await pollUntil { await server.gate.statistics().executions == 1 }
            try second.send("POST", "/pay", fields: [("Idempotency-Key", #""j""#)], body: #"{"key":"u1","amount":5}"#)
            try await pollUntil { await server.gate.statistics().waiters == 2 }
            await server.clock.advance(by: .milliseconds(20))
            let created = try await first.readResponse()
            let joined = try await second.readResponse()
            #expect(created.status == 201 && joined.status == 201)
            #expect(joined.body == created.body)
            #expect(joined.field("Idempotent-Replayed") == "true")
            #expect(created.field("Idempotent-Replayed") == nil)
        }
    }

    @Test func badPaymentsGet400() async throws {
        try await withHTTPServer { server in
            let client = try server.client()
            expectProblem(try await payRequest(client, idem: nil), 400, "missing-idempotency-key")
            expectProblem(try await payRequest(client, idem: #""""#), 400, "bad-idempotency-key")
            expectProblem(try await payRequest(client, idem: "\"\(String(repeating: "x", count: 256))\""), 400, "bad-idempotency-key")
            expectProblem(try await payRequest(client, idem: #""unterminated"#), 400, "bad-idempotency-key")
            expectProblem(try await payRequest(client, idem: #""k""#, amount: "0"), 400, "bad-amount")
            expectProblem(try await payRequest(client, idem: #""k""#, amount: "1.5"), 400, "bad-amount")
            expectProblem(try await payRequest(client, idem: #""k""#, amount: #""100""#), 400, "bad-amount")
            expectProblem(try await payRequest(client, idem: #""k""#, amount: "1000000000"), 400, "bad-amount")
            expectProblem(try await payRequest(client, key: "a b", idem: #""k""#), 400, "bad-key")
            expectProblem(
                try await client.request("POST", "/pay", fields: [("Idempotency-Key", #""k""#)], body: #"{"key":"u1","#), 400, "bad-json")
            expectProblem(try await client.request("POST", "/pay", fields: [("Idempotency-Key", #""k""#)], body: "[]"), 400, "bad-json")
            expectProblem(
                try await client.request("POST", "/pay", fields: [("Idempotency-Key", #""k""#)], body: #"{"amount":5}"#), 400, "bad-key")
            // An escaped quote inside the structured-field string is part of the key.
            try client.send("POST", "/pay", fields: [("Idempotency-Key", #""a\"b""#)], body: #"{"key":"u1","amount":5}"#)
            try await pollUntil { await server.gate.statistics().executions == 1 }
            await server.clock.advance(by: .milliseconds(20))
            #expect(try await client.readResponse().status == 201)
            #expect(try await payRequest(client, idem: #""a\"b""#, amount: "5").field("Idempotent-Replayed") == "true")
        }
    }

    @Test func searchAndPage() async throws {
        try await withHTTPServer { server in
            let typing = try server.client()
            let latest = try server.client()
            try typing.send("GET", "/search/box?q=hel")
            try await pollUntil { await server.gate.statistics().waiters == 1 }
            try latest.send("GET", "/search/box?q=hello+w%C3%B6rld%22")
            expectProblem(try await typing.readResponse(), 409, "superseded")
            await server.clock.advance(by: .milliseconds(100))
            try await pollUntil { await server.gate.statistics().executions == 1 }
            await server.clock.advance(by: .milliseconds(30))
            let results = try await latest.readResponse()
            #expect(results.status == 200)
            #expect(results.text == #"{"results":"hello wörld\""}"#)
            expectProblem(try await typing.request("GET", "/search/box"), 400, "bad-query")
            expectProblem(try await typing.request("GET", "/search/box?q="), 400, "bad-query")

            try typing.send("GET", "/page/feed/1")
            try await pollUntil { await server.gate.statistics().executions == 1 }
            try latest.send("GET", "/page/feed/1")
            try await pollUntil { await server.gate.statistics().waiters == 2 }
            await server.clock.advance(by: .milliseconds(40))
            let led = try await typing.readResponse()
            let shared = try await latest.readResponse()
            #expect(led.text == #"{"page":1,"items":["feed-2","feed-3"],"shared":false}"#)
            #expect(shared.text == #"{"page":1,"items":["feed-2","feed-3"],"shared":true}"#)
            expectProblem(try await typing.request("GET", "/page/feed/x"), 400, "bad-page")
            expectProblem(try await typing.request("GET", "/page/feed/1000001"), 400, "bad-page")
            expectProblem(try await typing.request("GET", "/page/feed"), 400, "bad-page")
        }
    }

    @Test func echoIsLimitedPerConnection() async throws {
        try await withHTTPServer(configure: { $0.echoRate = 1; $0.echoBurst = 2 }) { server in
            let client = try server.client()
            // Three requests in one write: answered one after another within the same instant
            // of the loop's clock, as the line protocol's ECHO test does.
            let request = HTTPTestClient.requestBytes("POST", "/echo", body: Array("x".utf8))
            try client.connection.send(Array(HTTPTestClient.requestBytes("POST", "/echo", body: Array("hello\r\nworld".utf8))) + request + request)
            let first = try await client.readResponse()
            #expect(first.status == 200 && first.text == "hello\r\nworld")
            #expect(first.field("Content-Type") == "application/octet-stream")
            // Burst 2 at 1 per second: a limit of 2, filling in 2 s.
            #expect(first.field("RateLimit-Policy") == #""echo";q=2;w=2"#)
            #expect(try rateLimitItem(first.field("RateLimit")).parameters["r"] == 1)
            #expect(try await client.readResponse().status == 200)
            let limited = try await client.readResponse()
            expectProblem(limited, 429, "limited")
            #expect(limited.field("Retry-After") == "1")
            #expect(limited.field("RateLimit") == #""echo";r=0;t=2"#)
            // Another connection has its own budget.
            #expect(try await server.client().request("POST", "/echo", body: "y").text == "y")
        }
    }

    @Test func unknownPathsMethodsAndHealth() async throws {
        try await withHTTPServer { server in
            let client = try server.client()
            expectProblem(try await client.request("GET", "/nothing"), 404, "not-found")
            let wrong = try await client.request("GET", "/tap/k")
            expectProblem(wrong, 405, "method-not-allowed")
            #expect(wrong.field("Allow") == "POST")
            #expect(try await client.request("POST", "/healthz").field("Allow") == "GET, HEAD")
            let health = try await client.request("GET", "/healthz")
            #expect(health.status == 200 && health.text == #"{"status":"ok"}"#)
            // An absolute-form target (as sent to a proxy) names the same route.
            let absolute = try await server.client().request("POST", "http://test/tap/abs")
            #expect(absolute.status == 200 && absolute.text == #"{"tap":1}"#)
            let metrics = try await client.request("GET", "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.field("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            #expect(metrics.text.contains("sluice_test_total 1"))
        }
    }

    @Test func oversizedHeadsAndBodiesAreRefused() async throws {
        try await withHTTPServer(configure: { $0.http.maximumHeadBytes = 1024; $0.http.maximumBodyBytes = 100 }) { server in
            let big = try server.client()
            let head = try await big.request("POST", "/tap/k", fields: [("X-Padding", String(repeating: "a", count: 2000))])
            expectProblem(head, 431, "header-fields-too-large")
            #expect(head.field("Connection") == "close")
            #expect(try await big.connection.waitForClose())

            let body = try server.client()
            try body.connection.send(Array("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n".utf8))
            #expect(try await body.readResponse().status == 413)

            // Within the caps, the same server answers.
            #expect(try await server.client().request("POST", "/echo", body: String(repeating: "b", count: 100)).status == 200)
        }
    }

    /// On a manual loop clock: a head begun is answered 408 once its timeout has passed since
    /// its first byte, not before.
    @Test func aHeadThatTakesTooLongGets408() async throws {
        let clock = ManualLoopClock()
        try await withHTTPServer(loops: 1, loopClock: clock, configure: { $0.http.headTimeout = .seconds(10) }) { server in
            let slow = try server.client()
            try slow.connection.send("POST /tap/k HTTP/1.1\r\nHost: t\r\n")
            // The server times the head once it has read its first bytes.
            let headDeadline = clock.now + .seconds(10)
            try await pollUntil { clock.nextDeadline.map { $0 <= headDeadline } ?? false }
            clock.advance(by: .seconds(10) - .nanoseconds(1))
            // A round trip on another connection of the same loop: what the advance made the
            // loop do is done by the time it is answered.
            #expect(try await server.client().request("GET", "/healthz").status == 200)
            #expect(!slow.connection.hasInputNow)
            clock.advance(by: .nanoseconds(1))
            expectProblem(try await slow.readResponse(), 408, "request-timeout")
            #expect(try await slow.connection.waitForClose())
        }
    }

    /// On a manual loop clock: a body is timed from the moment its head is complete (the time
    /// the head took does not count), and answered 408 once its timeout has passed, not before.
    @Test func aBodyThatTakesTooLongGets408() async throws {
        let clock = ManualLoopClock()
        try await withHTTPServer(loops: 1, loopClock: clock, configure: {
            $0.http.headTimeout = .seconds(10)
            $0.http.bodyTimeout = .seconds(20)
        }) { server in
            let slow = try server.client()
            // Round trips on another connection of the same loop: what the slow connection sent
            // (and what an advance made the loop do) is handled by the time each is answered.
            let barrier = try server.client()
            try slow.connection.send("POST /echo HTTP/1.1\r\nHost: t\r\n")
            #expect(try await barrier.request("GET", "/healthz").status == 200)
            clock.advance(by: .seconds(9))
            // The head completes with part of its body: the body's own time starts now.
            try slow.connection.send("Content-Length: 10\r\n\r\n123")
            #expect(try await barrier.request("GET", "/healthz").status == 200)
            clock.advance(by: .seconds(20) - .nanoseconds(1))
            #expect(try await barrier.request("GET", "/healthz").status == 200)
            #expect(!slow.connection.hasInputNow)
            clock.advance(by: .nanoseconds(1))
            expectProblem(try await slow.readResponse(), 408, "request-timeout")
            #expect(try await slow.connection.waitForClose())
        }
    }

    @Test func theConnectionCapIsSharedAndAnswered503() async throws {
        let accounting = ConnectionAccounting(maximumConnections: 2)
        try await withHTTPServer(accounting: accounting) { server in
            let first = try server.client()
            #expect(try await first.request("GET", "/healthz").status == 200)
            let second = try server.client()
            #expect(try await second.request("GET", "/healthz").status == 200)
            #expect(accounting.openConnections == 2)
            let third = try server.client()
            let refused = try await third.readResponse()
            expectProblem(refused, 503, "too-many-connections")
            #expect(try await third.connection.waitForClose())
            first.connection.abort()
            try await pollUntil { accounting.openConnections == 1 }
            #expect(try await server.client().request("GET", "/healthz").status == 200)
        }
    }

    @Test func whileTheGateDrainsHealthAndNewRequestsAre503() async throws {
        try await withHTTPServer { server in
            let paying = try server.client()
            try paying.send("POST", "/pay", fields: [("Idempotency-Key", #""d""#)], body: #"{"key":"u1","amount":7}"#)
            try await pollUntil { await server.gate.statistics().executions == 1 }
            let gate = server.gate
            let drained = Task { await gate.shutdown(gracePeriod: .seconds(30)) }
            try await pollUntil { !gate.isAcceptingRequests }
            let other = try server.client()
            let health = try await other.request("GET", "/healthz")
            #expect(health.status == 503 && health.text == #"{"status":"draining"}"#)
            let other2 = try server.client()
            let refused = try await other2.request("POST", "/tap/k")
            expectProblem(refused, 503, "shutting-down")
            #expect(refused.field("Connection") == "close")
            // The payment accepted before the drain finishes and is answered.
            await server.clock.advance(by: .milliseconds(20))
            #expect(try await paying.readResponse().status == 201)
            await drained.value
        }
    }

    @Test func theFieldNamesAreTheDraftsSpelling() {
        #expect(HTTPField.Name.rateLimit.rawName == "RateLimit")
        #expect(HTTPField.Name.rateLimitPolicy.rawName == "RateLimit-Policy")
        #expect(HTTPField.Name.idempotencyKey.rawName == "Idempotency-Key")
        #expect(HTTPField.Name.idempotentReplayed.rawName == "Idempotent-Replayed")
    }

    @Test func framingThatParsersCouldReadTwoWaysIsRefused() async throws {
        try await withHTTPServer { server in
            // HEAD: no body (the next answer stays in step).
            let client = try server.client()
            try client.connection.send("HEAD /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            let head = try await client.readResponse(toHead: true)
            #expect(head.status == 200 && head.body.isEmpty)
            #expect(head.field("Content-Type") == "application/json")
            #expect(try await client.request("GET", "/healthz").text == #"{"status":"ok"}"#)

            // Two Content-Length fields: 400, and the connection closes.
            let smuggler = try server.client()
            try smuggler.connection.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde")
            let refused = try await smuggler.readResponse()
            expectProblem(refused, 400, "duplicate-content-length")
            #expect(try await smuggler.connection.waitForClose())

            // Two Idempotency-Key fields, or a bare value with a space: 400.
            let payer = try server.client()
            expectProblem(
                try await payer.request(
                    "POST", "/pay", fields: [("Idempotency-Key", #""g""#), ("Idempotency-Key", #""h""#)],
                    body: #"{"key":"u1","amount":5}"#), 400, "bad-idempotency-key")
            expectProblem(try await payRequest(payer, idem: "tok en"), 400, "bad-idempotency-key")
        }
    }

    @Test func aPipelinedHeadIsBoundedLikeTheFirst() async throws {
        let clock = ManualLoopClock()
        try await withHTTPServer(loops: 1, loopClock: clock, configure: {
            $0.http.maximumHeadBytes = 1024
            $0.http.headTimeout = .seconds(10)
            $0.http.maximumBodyBytes = 100
        }) { server in
            // Over the head limit behind a small request: the first is answered, then 431.
            let big = try server.client()
            try big.connection.send(
                "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nX: \(String(repeating: "a", count: 1200))\r\n\r\n")
            #expect(try await big.readResponse().status == 200)
            expectProblem(try await big.readResponse(), 431, "header-fields-too-large")

            // A partial head behind a complete request: 408 after the head timeout (on the
            // loop's manual clock, once the server times that head).
            let slow = try server.client()
            try slow.connection.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nX: y")
            #expect(try await slow.readResponse().status == 200)
            let headDeadline = clock.now + .seconds(10)
            try await pollUntil { clock.nextDeadline.map { $0 <= headDeadline } ?? false }
            clock.advance(by: .seconds(10))
            expectProblem(try await slow.readResponse(), 408, "request-timeout")

            // A body announced over the limit: 413 as a problem, before any of it is read.
            let large = try server.client()
            try large.connection.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n")
            expectProblem(try await large.readResponse(), 413, "body-too-large")
        }
    }
}
