import Sluice

/// The plugin verbs a line server answers, each a ``LineCodec`` bound to a registered plugin,
/// in registration order (which is also the order of their counters in `STATS`).
///
/// ```swift
/// var plugins = PluginRegistry()
/// let tap = try plugins.register(ButtonTapPlugin())
/// var verbs = LineVerbs()
/// try verbs.register(TapLineCodec(), for: tap)
/// ```
public struct LineVerbs: Sendable {
    /// Verbs the server answers itself.
    public static let reservedVerbs: Set<String> = ["PING", "ECHO", "CANCEL", "STATS"]

    @usableFromInline var routes: [LineRoute] = []

    /// No verbs.
    public init() {}

    /// Adds `codec`'s verb for `plugin`'s requests.
    ///
    /// - Throws: `SluiceError` with code `.duplicatePlugin` when the verb (or the plugin) is
    ///   taken, `.reservedVerb` for a verb the server answers itself, `.invalidPlugin` for an
    ///   empty or malformed verb.
    @inlinable
    public mutating func register<Codec: LineCodec>(_ codec: Codec, for plugin: PluginHandle<Codec.Plugin>) throws(SluiceError) {
        let verb = codec.verb.uppercased()
        guard !verb.isEmpty, verb.utf8.count <= 32, verb.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw SluiceError(code: .invalidPlugin, message: "a verb is 1 to 32 visible ASCII characters", value: codec.verb)
        }
        guard !Self.reservedVerbs.contains(verb) else {
            throw SluiceError(code: .reservedVerb, message: "the server answers this verb itself", value: verb)
        }
        if routes.contains(where: { $0.verb == verb || $0.name == plugin.name }) {
            throw SluiceError(code: .duplicatePlugin, message: "this verb or plugin has a route already", value: "\(verb)/\(plugin.name)")
        }
        routes.append(LineRoute(codec: codec, plugin: plugin, verb: verb))
    }

    /// The verbs, in registration order.
    public var verbs: [String] { routes.map(\.verb) }
}

/// One verb's route: its codec and plugin with their types erased.
///
/// `register` and this initializer are inlinable so that the route's closure, and everything
/// it calls down to the plugin's policy, is specialized for the concrete codec and plugin in
/// the module that registers them: unspecialized, every request paid for generic metadata
/// lookups several times over.
@usableFromInline
struct LineRoute: Sendable {
    @usableFromInline let verb: String
    /// The plugin's name: the effect ID `CANCEL` names.
    @usableFromInline let name: String
    @usableFromInline let isCancellable: Bool
    @usableFromInline let counters: [PluginCounter]
    @usableFromInline let handle: @Sendable (LineSession, UnsafeRawBufferPointer, RequestLine.Parsed) -> Void

    @inlinable
    init<Codec: LineCodec>(codec: Codec, plugin: PluginHandle<Codec.Plugin>, verb: String) {
        self.verb = verb
        self.name = plugin.name
        self.isCancellable = codec.isCancellable
        self.counters = codec.counters
        self.handle = { session, line, parsed in session.route(line, parsed, codec: codec, plugin: plugin) }
    }
}

extension SluiceError.Code {
    /// A line codec claims a verb the line server answers itself (``LineVerbs/reservedVerbs``).
    public static let reservedVerb = SluiceError.Code(name: "reservedVerb")
}
