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

    @inlinable
    init<Codec: HTTPCodec>(codec: Codec, plugin: PluginHandle<Codec.Plugin>) {
        self.method = codec.method.rawValue
        self.path = codec.path
        self.isPrefix = codec.path.hasSuffix("/")
        self.handle = { session, request, rest, sequence, context in
            session.route(request, rest: rest, sequence: sequence, context: context, codec: codec, plugin: plugin)
        }
    }
}

extension SluiceError.Code {
    /// An HTTP codec claims a path the HTTP front answers itself (``HTTPRoutes/reservedPaths``).
    public static let reservedPath = SluiceError.Code(name: "reservedPath")
}
