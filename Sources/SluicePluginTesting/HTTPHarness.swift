import HTTPTypes
import Sluice
import SluiceHTTP

/// The HTTP front's plugin routes without sockets, on a manual clock: for testing HTTP codecs
/// (yours too) and their routes through the same reading, routing, decoding and rendering the
/// server does (`HTTPRoutes.answer(_:body:on:limits:)`), as `LineHarness` does for line codecs.
///
/// ```swift
/// var plugins = PluginRegistry()
/// let tap = try plugins.register(ButtonTapPlugin(window: .seconds(1)))
/// var routes = HTTPRoutes()
/// try routes.register(TapHTTPCodec(tap.plugin), for: tap)
/// let harness = try HTTPHarness(plugins: plugins, routes: routes)
/// #expect(await harness.request(.post, "/tap/k").status == .ok)
/// #expect(await harness.request(.post, "/tap/k").status == .tooManyRequests)
/// await harness.advance(by: .seconds(1))
/// #expect(await harness.request(.post, "/tap/k").status == .ok)
/// harness.shutdown()
/// ```
///
/// An answer that waits on the clock (a debounced search, an effect that sleeps on it) comes
/// once ``advance(by:)`` moves the clock: send the request from a task, then advance.
public final class HTTPHarness: Sendable {
    /// The gate and its manual clock.
    public let gateHarness: GateHarness
    /// The routes answered.
    public let routes: HTTPRoutes
    /// The parser's bounds.
    public let limits: HTTPRequestParser.Limits

    /// A harness with one loop running `plugins`, answering `routes`.
    public init(
        plugins: PluginRegistry, routes: HTTPRoutes, limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits(),
        options: GateOptions = GateOptions()
    ) throws {
        gateHarness = try GateHarness(plugins: plugins, options: options)
        self.routes = routes
        self.limits = limits
    }

    /// The clock every shard reads; only ``advance(by:)`` moves it.
    public var clock: ManualGateClock { gateHarness.clock }

    /// The gate behind the routes.
    public var gate: Gate { gateHarness.gate }

    /// Sends a request (`target` is the path and query, as on the request line) and returns
    /// the answer.
    public func request(
        _ method: HTTPRequest.Method, _ target: String, fields: HTTPFields = [:], body: String = ""
    ) async -> HTTPAnswer {
        let head = HTTPRequest(method: method, scheme: "http", authority: "harness", path: target, headerFields: fields)
        return await routes.answer(head, body: Array(body.utf8), on: gate, limits: limits)
    }

    /// Moves the clock forward, running the timers that come due (and the effects they wake).
    public func advance(by duration: Duration) async {
        await gateHarness.advance(by: duration)
    }

    /// Stops the loop (see `GateHarness/shutdown()`). Call once, from outside the loop.
    public func shutdown() {
        gateHarness.shutdown()
    }
}
