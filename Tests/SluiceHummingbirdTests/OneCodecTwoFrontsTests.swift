#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHTTP
import SluiceHummingbird
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

// A plugin and its HTTP codec as an app would write them, outside Sluice's modules: the same
// codec value serves Sluice's own HTTP front and a Hummingbird route.

/// A quota per API key (GCRA, 2 back to back, then 1 a minute) that answers with a note the
/// caller sent in its body.
struct QuotaPlugin: GatePlugin {
    struct Call: Sendable, Hashable {
        let key: String
        let note: String
    }

    let name = "quota"
    let options: RateLimitOptions
    let policy: GatePolicy

    init() throws {
        options = try RateLimitOptions(count: 1, per: .seconds(60), burst: 1)
        policy = .rateLimit(options)
    }

    func key(for input: Call) -> String { input.key }

    func run(_ input: Call, context: EffectContext) async throws -> String { input.note }

    func runImmediately(_ input: Call, context: EffectContext) throws -> String? { input.note }
}

/// `POST /quota/<key>` with a note as its body and an optional `X-Shout: yes` field → 200
/// `{"note":…,"remaining":…}` with the RateLimit fields; every other outcome as Sluice maps it.
struct QuotaHTTPCodec: HTTPCodec {
    typealias Plugin = QuotaPlugin

    let method = HTTPRequest.Method.post
    let path = "/quota/"
    let limits: RateLimitFields

    init(_ plugin: QuotaPlugin) {
        limits = .gcra(name: "quota", options: plugin.options)
    }

    func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> QuotaPlugin.Call {
        let key = try HTTPPathKey.decode(rest)
        let note = request.withBody { String(decoding: $0, as: UTF8.self) }
        guard note.utf8.count <= 64 else { throw HTTPProblem(.badRequest, "bad-note", detail: "a note is at most 64 bytes") }
        let shout = request.headerValue(.xShout) == "yes"
        return QuotaPlugin.Call(key: key, note: shout ? note.uppercased() : note)
    }

    func encode(_ outcome: GateOutcome<String>, for input: QuotaPlugin.Call) -> HTTPAnswer {
        guard case .ran(let note, let info) = outcome, let decision = info.rateLimit else {
            return HTTPOutcomeMapping.answer(for: outcome, limits: limits)
        }
        var json = JSONText()
        json.member("note", note)
        json.member("remaining", decision.remaining)
        var answer = HTTPAnswer.json(.ok, json.finished())
        limits.add(to: &answer.fields, remaining: decision.remaining, reset: decision.resetAfter)
        return answer
    }
}

extension HTTPField.Name {
    static var xShout: HTTPField.Name { forTests("X-Shout") }
}

/// One request of the script both fronts are sent, and what it must get.
private struct Step: Sendable {
    let target: String
    let fields: [(name: String, value: String)]
    let body: String
    let status: Int
}

/// What an answer is compared by: its status, body and the fields the codec and the outcome
/// mapping set.
private struct Answer: Equatable, CustomStringConvertible {
    let status: Int
    let fields: [String: String]
    let body: String
    var description: String { "\(status) \(fields) \(body)" }

    static let comparedFields = ["Content-Type", "RateLimit-Policy", "RateLimit", "Retry-After"]
}

@Suite struct OneCodecTwoFrontsTests {
    /// The script: two calls fit, the third is limited, a bad key and an overlong note are
    /// refused by the codec, a field reaches it, and another key has its own quota.
    private static let script: [Step] = [
        Step(target: "/quota/alice", fields: [], body: "first", status: 200),
        Step(target: "/quota/alice?x=1", fields: [("X-Shout", "yes")], body: "second", status: 200),
        Step(target: "/quota/alice", fields: [], body: "third", status: 429),
        Step(target: "/quota/", fields: [], body: "no key", status: 400),
        Step(target: "/quota/bob", fields: [], body: String(repeating: "n", count: 65), status: 400),
        Step(target: "/quota/bob", fields: [], body: "", status: 200),
    ]

    /// The script through Sluice's own HTTP front.
    private static func throughSluiceFront() async throws -> [Answer] {
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "codec")
        let clock = ManualGateClock()
        var plugins = PluginRegistry()
        let plugin = try QuotaPlugin()
        let quota = try plugins.register(plugin)
        var routes = HTTPRoutes()
        try routes.register(QuotaHTTPCodec(plugin), for: quota)
        let gate = try Gate(group: group, plugins: plugins, clock: clock.clock(for:))
        let front = try HTTPFront(gate: gate, routes: routes, configuration: HTTPFrontConfiguration(http: HTTPConfiguration(port: 0)))
        defer {
            group.shutdownGracefully()
            clock.cancelAll()
        }
        let port = try await front.start()
        let client = try HTTPTestClient(port: port)
        var answers: [Answer] = []
        for step in script {
            let response = try await client.request("POST", step.target, fields: step.fields, body: step.body)
            var fields: [String: String] = [:]
            for name in Answer.comparedFields { fields[name] = response.field(name) }
            answers.append(Answer(status: response.status, fields: fields, body: response.text))
        }
        return answers
    }

    /// The script through a Hummingbird route served by ``HTTPCodecMiddleware``.
    private static func throughHummingbird(_ mode: ServingMode) async throws -> [Answer] {
        var plugins = PluginRegistry()
        let plugin = try QuotaPlugin()
        let quota = try plugins.register(plugin)
        let fixture = try Fixture(plugins)
        let gate = fixture.gate
        let router = Router()
        router.add(middleware: try HTTPCodecMiddleware(QuotaHTTPCodec(plugin), plugin: quota, gate: gate))
        router.get("/other") { _, _ in "not the codec's" }
        let answers = Mutex<[Answer]>([])
        try await fixture.test(router, mode) { client in
            for step in script {
                var headers = HTTPFields()
                for (name, value) in step.fields { headers[HTTPField.Name.forTests(name)] = value }
                let sent = try await client.send(.post, step.target, headers: headers, body: step.body)
                var fields: [String: String] = [:]
                for name in Answer.comparedFields { fields[name] = sent.headers[HTTPField.Name.forTests(name)] }
                let answer = Answer(status: Int(sent.status.code), fields: fields, body: sent.body)
                answers.withSanitizedLock { $0.append(answer) }
            }
            // Requests off the codec's route go on down the chain.
            #expect(try await client.send(.get, "/other").body == "not the codec's")
            #expect(try await client.send(.get, "/quota/alice").status == .notFound)
        }
        return answers.withSanitizedLock { $0 }
    }

    @Test(arguments: testModes)
    func oneCodecAnswersAlikeOnBothFronts(_ mode: ServingMode) async throws {
        let sluice = try await Self.throughSluiceFront()
        let hummingbird = try await Self.throughHummingbird(mode)
        #expect(sluice.map(\.status) == Self.script.map(\.status))
        #expect(hummingbird == sluice)
        #expect(sluice.first?.body == #"{"note":"first","remaining":1}"#)
        #expect(sluice.dropFirst().first?.body == #"{"note":"SECOND","remaining":0}"#)
        #expect(sluice.first?.fields["RateLimit-Policy"] != nil && sluice[2].fields["Retry-After"] != nil)
    }

    @Test func aRequestTheStrictParserRefusesIsRefusedOnTheRouteToo() async throws {
        var plugins = PluginRegistry()
        let plugin = try QuotaPlugin()
        let quota = try plugins.register(plugin)
        let fixture = try Fixture(plugins)
        let router = Router()
        router.add(middleware: try HTTPCodecMiddleware(
            QuotaHTTPCodec(plugin), plugin: quota, gate: fixture.gate, limits: HTTPRequestParser.Limits(maximumBodyBytes: 8)))
        try await fixture.test(router, .router) { client in
            let long = try await client.send(.post, "/quota/alice", body: String(repeating: "n", count: 9))
            #expect(long.status == .contentTooLarge)
            #expect(long.body.contains("body-too-large"))
            var headers = HTTPFields()
            headers[.xShout] = "tab\tinside"
            let fine = try await client.send(.post, "/quota/alice", headers: headers, body: "short")
            #expect(fine.status == .ok)
        }
        for path in ["quota", "/with space", "/query?x", "/" + String(repeating: "q", count: HTTPRoutePath.maximumLength)] {
            #expect(throws: SluiceError.self, "\(path)") {
                try HTTPCodecMiddleware<BadPathCodec, BasicRequestContext>(BadPathCodec(plugin, path: path), plugin: quota, gate: fixture.gate)
            }
        }
    }
}

/// A codec whose path a route cannot have.
private struct BadPathCodec: HTTPCodec {
    typealias Plugin = QuotaPlugin
    let method = HTTPRequest.Method.post
    let path: String
    let inner: QuotaHTTPCodec
    init(_ plugin: QuotaPlugin, path: String) {
        inner = QuotaHTTPCodec(plugin)
        self.path = path
    }
    func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> QuotaPlugin.Call { try inner.decode(request, rest: rest) }
    func encode(_ outcome: GateOutcome<String>, for input: QuotaPlugin.Call) -> HTTPAnswer { inner.encode(outcome, for: input) }
}
#endif
