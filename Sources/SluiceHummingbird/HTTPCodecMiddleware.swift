#if Hummingbird
import HTTPTypes
import Hummingbird
import Sluice
import SluiceHTTPCodec

/// Serves a plugin through its `HTTPCodec`: the codec Sluice's own HTTP front serves, written
/// once, answers the same requests alike in a Hummingbird app.
///
/// A request with the codec's method on its path (exact, or under it for a path ending in `/`)
/// is read as Sluice's strict parser reads one (`HTTPRequestView.reading(_:body:limits:_:)`),
/// decoded by the codec, submitted to the gate, and answered with what the codec renders from
/// the typed outcome; any other request goes on down the chain. A request the parser or the
/// codec refuses is answered with its problem (400, 413, …).
///
/// ```swift
/// router.add(middleware: try HTTPCodecMiddleware(QuotaHTTPCodec(plugin), plugin: quota, gate: gate))
/// ```
public struct HTTPCodecMiddleware<Codec: HTTPCodec, Context: RequestContext>: RouterMiddleware {
    /// The codec.
    public let codec: Codec
    /// The plugin the codec's requests go to.
    public let plugin: PluginHandle<Codec.Plugin>
    /// The gate the plugin was registered with.
    public let gate: Gate
    /// The parser's bounds (the body is collected up to its `maximumBodyBytes`).
    public let limits: HTTPRequestParser.Limits
    /// The codec's path, checked.
    public let route: HTTPRoutePath

    /// A middleware serving `codec`'s route with `plugin` on `gate`.
    ///
    /// - Throws: `SluiceError` with code `.invalidPlugin` when `HTTPRoutePath` refuses the
    ///   codec's path (as Sluice's own HTTP front does).
    public init(
        _ codec: Codec,
        plugin: PluginHandle<Codec.Plugin>,
        gate: Gate,
        limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits()
    ) throws(SluiceError) {
        self.route = try HTTPRoutePath(codec.path)
        self.codec = codec
        self.plugin = plugin
        self.gate = gate
        self.limits = limits
    }

    /// Answers a request on the codec's route; passes any other on.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == codec.method, let rest = route.rest(of: HTTPRequestView.path(ofTarget: request.head.path ?? "/")) else {
            return try await next(request, context)
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limits.maximumBodyBytes)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            return HTTPProblem(.contentTooLarge, "body-too-large", detail: "the request body is over \(limits.maximumBodyBytes) bytes").answer.response
        }
        let input: Codec.Plugin.Input
        do {
            input = try HTTPRequestView.reading(request.head, body: body.readableBytesView, limits: limits) { view throws(HTTPProblem) in
                try codec.decode(view, rest: rest)
            }
        } catch {
            return error.answer.response
        }
        let outcome = await gate.submit(gate.request(plugin, input))
        return codec.encode(outcome, for: input).response
    }
}
#endif
