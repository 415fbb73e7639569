#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHummingbird
import SluicePluginTesting
import Testing

@Suite struct ThrottleMiddlewareTests {
    @Test(arguments: testModes)
    func theFirstRequestOfAWindowWinsTheOthersAre429(mode: ServingMode) async throws {
        var plugins = PluginRegistry()
        let clock = ManualGateClock()
        let likes = try ThrottleRule(name: "like", window: .seconds(1), in: &plugins)
        let fixture = try Fixture(plugins, clock: clock)
        let runs = PluginCounter("test_like_runs")
        let router = Router()
        router.group("like")
            .add(middleware: ThrottleMiddleware(likes, gate: fixture.gate) { _, context in context.parameters.get("post") })
            .post(":post") { _, _ in
                runs.increment()
                return "liked"
            }
        try await fixture.test(router, mode) { client in
            let first = try await client.send(.post, "/like/7")
            #expect(first.status == .ok)
            #expect(first.body == "liked")
            #expect(first.headers[.rateLimitPolicyForTests] == #""like";q=1;w=1"#)
            #expect(first.headers[.rateLimitForTests] == #""like";r=0;t=1"#)

            let second = try await client.send(.post, "/like/7")
            #expect(second.status == .tooManyRequests)
            #expect(second.headers[.retryAfter] == "1")
            #expect(second.headers[.rateLimitPolicyForTests] == #""like";q=1;w=1"#)
            #expect(second.headers[.rateLimitForTests] == #""like";r=0;t=1"#)
            #expect(second.body.contains(#""type":"urn:sluice:problem:throttled""#))

            #expect(try await client.send(.post, "/like/8").status == .ok)
            await fixture.clock.advance(by: .seconds(1))
            #expect(try await client.send(.post, "/like/7").status == .ok)
            #expect(runs.current == 3)
        }
    }

    /// The rule's fields replace the route's own fields of the same names, once each, and leave
    /// its other fields as they were.
    @Test(arguments: testModes)
    func theRulesFieldsReplaceTheRoutesOwnOfTheSameName(mode: ServingMode) async throws {
        var plugins = PluginRegistry()
        let likes = try ThrottleRule(name: "like", window: .seconds(1), in: &plugins)
        let fixture = try Fixture(plugins, clock: ManualGateClock())
        let router = Router()
        router.group("like")
            .add(middleware: ThrottleMiddleware(likes, gate: fixture.gate) { _, context in context.parameters.get("post") })
            .post(":post") { _, _ in
                var headers = HTTPFields()
                headers[.rateLimitForTests] = #""route";r=5;t=9"#
                headers.append(HTTPField(name: .rateLimitForTests, value: #""route-2";r=1;t=1"#))
                headers[.cacheControl] = "no-store"
                return Response(status: .ok, headers: headers)
            }
        try await fixture.test(router, mode) { client in
            let answer = try await client.send(.post, "/like/7")
            #expect(answer.status == .ok)
            #expect(answer.headers[values: .rateLimitForTests] == [#""like";r=0;t=1"#])
            #expect(answer.headers[values: .rateLimitPolicyForTests] == [#""like";q=1;w=1"#])
            #expect(answer.headers[.cacheControl] == "no-store")
        }
    }
}
#endif
