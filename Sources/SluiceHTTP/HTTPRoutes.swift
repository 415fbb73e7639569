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
    ///   `.reservedPath` for a path the front answers itself, `.invalidPlugin` for a path that
    ///   does not start with `/`.
    @inlinable
    public mutating func register<Codec: HTTPCodec>(_ codec: Codec, for plugin: PluginHandle<Codec.Plugin>) throws(SluiceError) {
        let path = codec.path
        guard path.hasPrefix("/"), path.utf8.count <= 64, path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") }) else {
            throw SluiceError(code: .invalidPlugin, message: "a route path starts with / and has no spaces or ?", value: path)
        }
        guard !HTTPRoutes.reservedPaths.contains(path) else {
            throw SluiceError(code: .reservedPath, message: "the front answers this path itself", value: path)
        }
        let method = codec.method.rawValue
        if routes.contains(where: { $0.path == path && $0.method == method }) {
            throw SluiceError(code: .duplicatePlugin, message: "this method and path have a route already", value: "\(method) \(path)")
        }
        routes.append(HTTPRoute(codec: codec, plugin: plugin))
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
                        ? HTTPProblem(.notFound, "not-found", detail: "no route for \(view.method.rawValue) \(path)").answer
                        : HTTPFront.methodNotAllowed(match.allowed)
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
            let rest: Substring
            // Byte comparisons: a path is ASCII, and Character comparison costs far more.
            guard path.utf8.starts(with: route.path.utf8) else { continue }
            if route.isPrefix {
                rest = path[path.utf8.index(path.startIndex, offsetBy: route.path.utf8.count)...]
            } else {
                guard path.utf8.count == route.path.utf8.count else { continue }
                rest = ""
            }
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
    @usableFromInline let path: String
    @usableFromInline let isPrefix: Bool
    @usableFromInline let handle: @Sendable (HTTPSession, HTTPRequestView, Substring, UInt64, HTTPAnswerContext) -> Void
    /// Decodes a request for the route (with the rest of its path) into the submission that
    /// answers it on a gate, or the codec's problem: the front's way without a session.
    @usableFromInline let prepare: @Sendable (HTTPRequestView, Substring) -> Result<@Sendable (Gate) async -> HTTPAnswer, HTTPProblem>

    @inlinable
    init<Codec: HTTPCodec>(codec: Codec, plugin: PluginHandle<Codec.Plugin>) {
        self.method = codec.method.rawValue
        self.path = codec.path
        self.isPrefix = codec.path.hasSuffix("/")
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
