import HTTPTypes
import Sluice
import SluiceLibevent

/// The plugin routes an HTTP front answers, each an `HTTPCodec` bound to a registered plugin.
///
/// ```swift
/// var routes = HTTPRoutes()
/// try routes.register(TapHTTPCodec(tap.plugin), for: tap)
/// ```
public struct HTTPRoutes: Sendable {
    /// Paths the front answers itself.
    public static let reservedPaths: Set<String> = ["/echo", "/metrics", "/healthz"]

    @usableFromInline var routes: [HTTPRoute] = []

    /// No routes.
    public init() {}

    /// Adds `codec`'s route for `plugin`'s requests.
    ///
    /// - Throws: `SluiceError` with code `.duplicatePlugin` when the method and path are taken,
    ///   `.reservedPath` for a path the front answers itself, `.invalidPlugin` for a path
    ///   `HTTPRoutePath` refuses.
    @inlinable
    public mutating func register<Codec: HTTPCodec>(_ codec: Codec, for plugin: PluginHandle<Codec.Plugin>) throws(SluiceError) {
        let path = try HTTPRoutePath(codec.path)
        guard !HTTPRoutes.reservedPaths.contains(path.text) else {
            throw SluiceError(code: .reservedPath, message: "the front answers this path itself", value: path.text)
        }
        let method = codec.method.rawValue
        if routes.contains(where: { $0.path == path && $0.method == method }) {
            throw SluiceError(code: .duplicatePlugin, message: "this method and path have a route already", value: "\(method) \(path)")
        }
        routes.append(HTTPRoute(codec: codec, path: path, plugin: plugin))
    }

    /// Answers `request` (a head and its whole body) through the route it matches, without a
    /// socket or a session: the request is read by the strict parser
    /// (`HTTPRequestView.reading(_:body:limits:_:)`), the route's codec decodes it, `gate`
    /// decides, and the codec renders the outcome, as the front does for a request it reads.
    /// A path no route has is answered 404 `not-found`, a method the path does not answer 405
    /// with `Allow`, a request the parser or the codec refuses with its problem. The paths the
    /// front answers itself (``reservedPaths``) are not routes: 404 here.
    ///
    /// - Parameters:
    ///   - request: the head.
    ///   - body: the whole body.
    ///   - gate: the gate the routes' plugins are registered with.
    ///   - limits: the parser's bounds.
    public func answer(
        _ request: HTTPRequest, body: [UInt8] = [], on gate: Gate, limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits()
    ) async -> HTTPAnswer {
        let decided: @Sendable (Gate) async -> HTTPAnswer
        do {
            decided = try HTTPRequestView.reading(request, body: body, limits: limits) { view throws(HTTPProblem) in
                let path = view.path
                let match = self.match(method: view.method.rawValue, path: path[...])
                guard let route = match.route else {
                    let answer = match.allowed.isEmpty
                        ? HTTPAnswer.noRoute(method: view.method, path: path)
                        : HTTPAnswer.methodNotAllowed(match.allowed)
                    return { _ in answer }
                }
                return try route.prepare(view, match.rest).get()
            }
        } catch {
            return error.answer
        }
        return await decided(gate)
    }

    /// The routes, as `METHOD path`, in registration order.
    public var descriptions: [String] { routes.map { "\($0.method) \($0.path)" } }

    /// The route for `method` on `path`, with the rest of the path after a prefix; or the methods
    /// the path allows when none has this method.
    @usableFromInline
    func match(method: String, path: Substring) -> (route: HTTPRoute?, rest: Substring, allowed: [String]) {
        var allowed: [String] = []
        for route in routes {
            guard let rest = route.path.rest(of: path) else { continue }
            if route.method == method { return (route, rest, []) }
            allowed.append(route.method)
        }
        return (nil, "", allowed)
    }
}

/// One route: its codec and plugin with their types erased.
///
/// `register` and this initializer are inlinable so that the handler, and everything it calls
/// down to the plugin's policy, is specialized for the concrete codec and plugin where they are
/// registered.
@usableFromInline
struct HTTPRoute: Sendable {
    @usableFromInline let method: String
    @usableFromInline let path: HTTPRoutePath
    @usableFromInline let handle: @Sendable (HTTPSession, HTTPRequestView, Substring, UInt64, HTTPAnswerContext) -> Void
    /// Decodes a request for the route (with the rest of its path) into the submission that
    /// answers it on a gate, or the codec's problem: the front's way without a session.
    @usableFromInline let prepare: @Sendable (HTTPRequestView, Substring) -> Result<@Sendable (Gate) async -> HTTPAnswer, HTTPProblem>

    @inlinable
    init<Codec: HTTPCodec>(codec: Codec, path: HTTPRoutePath, plugin: PluginHandle<Codec.Plugin>) {
        self.method = codec.method.rawValue
        self.path = path
        self.handle = { session, request, rest, sequence, context in
            session.route(request, rest: rest, sequence: sequence, context: context, codec: codec, plugin: plugin)
        }
        self.prepare = { request, rest in
            Result { () throws(HTTPProblem) -> @Sendable (Gate) async -> HTTPAnswer in
                let input = try codec.decode(request, rest: rest)
                return { gate in codec.encode(await gate.submit(gate.request(plugin, input)), for: input) }
            }
        }
    }
}

extension SluiceError.Code {
    /// An HTTP codec claims a path the HTTP front answers itself (``HTTPRoutes/reservedPaths``).
    public static let reservedPath = SluiceError.Code(name: "reservedPath")
}
