#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHummingbird
import SluicePluginTesting
import Testing

@Suite struct RateLimitMiddlewareTests {
    /// 2 per minute with a burst of 1: `q=2`, a full bucket in 60 s, one unit back every 30 s.

    private static func app(
        shadowMode: Bool = false, store: PluginStore = .memory
    ) throws -> (Fixture, RateLimitRule, Router<BasicRequestContext>) {
        var plugins = PluginRegistry()
        let clock = ManualGateClock()
        let limit = try RateLimitOptions(count: 2, per: .seconds(60), burst: 1)
        let rule = try RateLimitRule(
            name: "search", limit: limit, shadowMode: shadowMode, store: store, in: &plugins)
        let fixture = try Fixture(plugins, clock: clock)
        let router = Router()
        router.group("search")
            .add(middleware: RateLimitMiddleware(rule, gate: fixture.gate) { request, _ in request.headers[.authorization] })
            .get { _, _ in "results" }
            .get("missing") { _, _ -> String in throw HTTPError(.notFound) }
        return (fixture, rule, router)
    }

    @Test(arguments: testModes)
    func everyGovernedAnswerCarriesTheFieldsAndTheThirdIs429(mode: ServingMode) async throws {
        let (fixture, _, router) = try Self.app()
        try await fixture.test(router, mode) { client in
            let first = try await client.send(.get, "/search", headers: user("ann"))
            #expect(first.status == .ok)
            #expect(first.body == "results")
            #expect(first.headers[.rateLimitPolicyForTests] == #""search";q=2;w=60"#)
            #expect(first.headers[.rateLimitForTests] == #""search";r=1;t=30"#)
            #expect(first.headers[.retryAfter] == nil)

            let second = try await client.send(.get, "/search", headers: user("ann"))
            #expect(second.status == .ok)
            #expect(second.headers[.rateLimitForTests] == #""search";r=0;t=60"#)

            let third = try await client.send(.get, "/search", headers: user("ann"))
            #expect(third.status == .tooManyRequests)
            #expect(third.headers[.retryAfter] == "30")
            #expect(third.headers[.rateLimitPolicyForTests] == #""search";q=2;w=60"#)
            #expect(third.headers[.rateLimitForTests] == #""search";r=0;t=60"#)
            #expect(third.headers[.contentType] == "application/problem+json")
            #expect(third.body.contains(#""type":"urn:sluice:problem:limited""#))

            // Another key has its own quota; half a minute later one unit is back.
            #expect(try await client.send(.get, "/search", headers: user("bob")).status == .ok)
            await fixture.clock.advance(by: .seconds(30))
            let later = try await client.send(.get, "/search", headers: user("ann"))
            #expect(later.status == .ok)
            #expect(later.headers[.rateLimitForTests] == #""search";r=0;t=60"#)
        }
    }

    @Test(arguments: testModes)
    func anErrorTheRouteThrowsCarriesTheFieldsToo(mode: ServingMode) async throws {
        let (fixture, _, router) = try Self.app()
        try await fixture.test(router, mode) { client in
            let missing = try await client.send(.get, "/search/missing", headers: user("ann"))
            #expect(missing.status == .notFound)
            #expect(missing.headers[.rateLimitForTests] == #""search";r=1;t=30"#)
        }
    }

    @Test(arguments: testModes)
    func aRequestWithoutAKeyIsNotGoverned(mode: ServingMode) async throws {
        let (fixture, _, router) = try Self.app()
        try await fixture.test(router, mode) { client in
            for _ in 1...3 {
                let answer = try await client.send(.get, "/search")
                #expect(answer.status == .ok)
                #expect(answer.headers[.rateLimitForTests] == nil)
                #expect(answer.headers[.rateLimitPolicyForTests] == nil)
            }
        }
    }

    @Test(arguments: testModes)
    func aKeyOver256BytesIs400(mode: ServingMode) async throws {
        let (fixture, _, router) = try Self.app()
        try await fixture.test(router, mode) { client in
            for _ in 1...3 {
                let long = try await client.send(.get, "/search", headers: user(String(repeating: "x", count: 4096)))
                #expect(long.status == .badRequest)
                #expect(long.body.contains(#""type":"urn:sluice:problem:bad-key""#))
            }
            #expect(try await client.send(.get, "/search", headers: user("ann")).status == .ok)
        }
    }

    @Test(arguments: testModes)
    func shadowModeReportsAndNeverRefuses(mode: ServingMode) async throws {
        let (fixture, rule, router) = try Self.app(shadowMode: true)
        try await fixture.test(router, mode) { client in
            _ = try await client.send(.get, "/search", headers: user("ann"))
            _ = try await client.send(.get, "/search", headers: user("ann"))
            let over = try await client.send(.get, "/search", headers: user("ann"))
            #expect(over.status == .ok)
            #expect(over.body == "results")
            #expect(over.headers[.retryAfter] == nil)
            #expect(over.headers[.rateLimitPolicyForTests] == #""search";q=2;w=60"#)
            #expect(over.headers[.rateLimitForTests] == #""search";r=0;t=60"#)
            #expect(rule.shadowLimited.current == 1)
        }
    }

    @Test(arguments: testModes, [false, true])
    func aLimitWhoseStoreIsUnavailableAnswers503OrInShadowModeLetsThrough(mode: ServingMode, shadowMode: Bool) async throws {
        let store = MemoryStore()
        store.setAvailable(false)
        let (fixture, rule, router) = try Self.app(
            shadowMode: shadowMode, store: try PluginStore.shared(store, whenUnavailable: .closed))
        try await fixture.test(router, mode) { client in
            for _ in 1...3 {
                let answer = try await client.send(.get, "/search", headers: user("ann"))
                #expect(answer.headers[.rateLimitPolicyForTests] == #""search";q=2;w=60"#)
                if shadowMode {
                    #expect(answer.status == .ok)
                    #expect(answer.body == "results")
                    #expect(answer.headers[.retryAfter] == nil)
                } else {
                    #expect(answer.status == .serviceUnavailable)
                    #expect(answer.body.contains(#""type":"urn:sluice:problem:unavailable""#))
                    #expect(answer.headers[.retryAfter] == "1")
                    #expect(answer.headers[.rateLimitForTests] == #""search";r=0;t=1"#)
                }
            }
            #expect(rule.shadowUndecided.current == (shadowMode ? 3 : 0))
            #expect(rule.shadowLimited.current == 0)
        }
    }

    @Test func everyRuleIsAPluginOfTheGate() throws {
        var plugins = PluginRegistry()
        let shared = try PluginStore.shared(MemoryStore())
        let limit = try RateLimitOptions(count: 2, per: .seconds(60), burst: 1)
        _ = try RateLimitRule(name: "local", limit: limit, in: &plugins)
        _ = try RateLimitRule(name: "shared", limit: limit, store: shared, in: &plugins)
        _ = try ThrottleRule(name: "like", window: .seconds(1), store: shared, in: &plugins)
        #expect(plugins.names == ["local", "shared", "like"])
        #expect(throws: SluiceError.self) { try ThrottleRule(name: "like", window: .seconds(1), in: &plugins) }
        #expect(throws: SluiceError.self) { try RateLimitRule(name: "Bad Name", limit: limit, in: &plugins) }
    }
}
#endif
