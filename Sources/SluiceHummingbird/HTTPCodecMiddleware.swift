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

    /// A middleware serving `codec`'s route with `plugin` on `gate`.
    ///
    /// - Throws: `SluiceError` with code `.invalidPlugin` when the codec's path does not start
    ///   with `/` or holds a space, a control byte or `?`.
    public init(
        _ codec: Codec,
        plugin: PluginHandle<Codec.Plugin>,
        gate: Gate,
        limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits()
    ) throws(SluiceError) {
        let path = codec.path
        guard path.hasPrefix("/"), path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") }) else {
            throw SluiceError(code: .invalidPlugin, message: "a route path starts with / and has no spaces or ?", value: path)
        }
        self.codec = codec
        self.plugin = plugin
        self.gate = gate
        self.limits = limits
    }

    /// Answers a request on the codec's route; passes any other on.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == codec.method, let rest = Self.rest(of: request.head.path ?? "/", under: codec.path) else {
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
                try codec.decode(view, rest: Substring(rest))
            }
        } catch {
            return error.answer.response
        }
        let outcome = await gate.submit(gate.request(plugin, input))
        return codec.encode(outcome, for: input).response
    }

    /// The path after `route` when `target`'s path (before any `?`) is `route` or, for a route
    /// ending in `/`, lies under it; `nil` otherwise.
    static func rest(of target: String, under route: String) -> Substring? {
        let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? Substring(target)
        guard path.utf8.starts(with: route.utf8) else { return nil }
        if route.hasSuffix("/") {
            return path[path.utf8.index(path.startIndex, offsetBy: route.utf8.count)...]
        }
        return path.utf8.count == route.utf8.count ? "" : nil
    }
}
#endif
