#if Hummingbird
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Sluice
import SluiceHummingbird
import SluicePluginTesting
import Testing

@Suite struct RateLimitMiddlewareTests {
    /// 2 per minute with a burst of 1: `q=2`, a full bucket in 60 s, one unit back every 30 s.

    private static func app(shadowMode: Bool = false) throws -> (Fixture, RateLimitRule, Router<BasicRequestContext>) {
        var plugins = PluginRegistry()
        let limit = try RateLimitOptions(count: 2, per: .seconds(60), burst: 1)
        let rule = try RateLimitRule(name: "search", limit: limit, shadowMode: shadowMode, in: &plugins)
        let fixture = try Fixture(plugins)
        let router = Router()
        router.group("search")
            .add(middleware: RateLimitMiddleware(rule, gate: fixture.gate) { request, _ in request.headers[.authorization] })
            .get { _, _ in "results" }
            .get("missing") { _, _ -> String in throw HTTPError(.notFound) }
        return (fixture, rule, router)
    }

    @Test(arguments: testModes)
    func everyGovernedAnswerCarriesTheFieldsAndTheThirdIs429(mode: TestingSetup) async throws {
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
    func anErrorTheRouteThrowsCarriesTheFieldsToo(mode: TestingSetup) async throws {
        let (fixture, _, router) = try Self.app()
        try await fixture.test(router, mode) { client in
            let missing = try await client.send(.get, "/search/missing", headers: user("ann"))
            #expect(missing.status == .notFound)
            #expect(missing.headers[.rateLimitForTests] == #""search";r=1;t=30"#)
        }
    }

    @Test(arguments: testModes)
    func aRequestWithoutAKeyIsNotGoverned(mode: TestingSetup) async throws {
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
    func shadowModeReportsAndNeverRefuses(mode: TestingSetup) async throws {
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
}
#endif
