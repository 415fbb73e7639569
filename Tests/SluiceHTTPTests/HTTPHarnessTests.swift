import HTTPTypes
import Sluice
import SluiceBuiltInCodecs
import SluiceButtonTap
import SluiceHTTP
import SluicePluginTesting
import SluiceRateLimit
import Testing

/// HTTP routes answered without a socket, on a manual clock.
@Suite struct HTTPHarnessTests {
    private static func harness() throws -> HTTPHarness {
        var plugins = PluginRegistry()
        var routes = HTTPRoutes()
        let tap = try plugins.register(ButtonTapPlugin(window: .seconds(1)))
        try routes.register(TapHTTPCodec(tap.plugin), for: tap)
        let limit = try plugins.register(RateLimitPlugin(count: 1, per: .seconds(60), burst: 1))
        try routes.register(LimitHTTPCodec(limit.plugin), for: limit)
        return try HTTPHarness(plugins: plugins, routes: routes)
    }

    @Test func aThrottledRouteOpensAgainWhenTheClockMoves() async throws {
        let harness = try Self.harness()
        defer { harness.shutdown() }
        #expect(await harness.request(.post, "/tap/k").status == .ok)
        let throttled = await harness.request(.post, "/tap/k")
        #expect(throttled.status == .tooManyRequests)
        #expect(throttled.fields[.retryAfter] == "1")
        await harness.advance(by: .milliseconds(999))
        #expect(await harness.request(.post, "/tap/k").status == .tooManyRequests)
        await harness.advance(by: .milliseconds(1))
        #expect(await harness.request(.post, "/tap/k").status == .ok)
        // Another key has a window of its own.
        #expect(await harness.request(.post, "/tap/other").status == .ok)
    }

    @Test func routingAndRefusalsAreTheFronts() async throws {
        let harness = try Self.harness()
        defer { harness.shutdown() }
        // A rate limit with its draft-11 fields, the limit spent, then refused.
        let first = await harness.request(.post, "/limit/u?cost=2")
        #expect(first.status == .ok)
        #expect(first.fields[HTTPField.Name("RateLimit-Policy")!] != nil)
        #expect(await harness.request(.post, "/limit/u").status == .tooManyRequests)
        // The codec refuses a bad cost, the route table a wrong method or path.
        let badCost = await harness.request(.post, "/limit/v?cost=9")
        #expect(badCost.status == .badRequest)
        #expect(String(decoding: badCost.body, as: UTF8.self).contains("bad-cost"))
        let wrongMethod = await harness.request(.get, "/tap/k")
        #expect(wrongMethod.status == .methodNotAllowed)
        #expect(wrongMethod.fields[.allow] == "POST")
        #expect(await harness.request(.post, "/nowhere").status == .notFound)
        #expect(await harness.request(.post, "/echo").status == .notFound)
        // The strict parser reads the request first.
        var smuggling = HTTPFields()
        smuggling[.contentLength] = "5"
        #expect(await harness.request(.post, "/tap/k k").status == .badRequest)
        #expect(await harness.request(.post, "/tap/z", fields: smuggling).status == .ok)
    }
}
