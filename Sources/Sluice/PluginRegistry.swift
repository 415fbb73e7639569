import SluiceCore

/// The plugins a server runs, in registration order (which is also the order of their
/// counters in `STATS`).
public struct PluginRegistry: Sendable {
    /// Verbs the server answers itself.
    public static let reservedVerbs: Set<String> = ["PING", "ECHO", "CANCEL", "STATS"]

    private(set) var plugins: [RegisteredPlugin] = []

    /// An empty registry.
    public init() {}

    /// Adds a plugin whose tables share `budget` (split over the shards).
    ///
    /// - Throws: ``GateError`` with code `.duplicatePlugin` when the verb or name is taken,
    ///   `.reservedVerb` for a verb the server answers itself, `.invalidPlugin` for an empty or
    ///   malformed verb or name.
    public mutating func register<Plugin: GatePlugin>(
        _ plugin: Plugin,
        budget: MemoryBudget = .bytes(16 << 20)
    ) throws(GateError) {
        let verb = plugin.verb.uppercased()
        guard !verb.isEmpty, verb.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw GateError(code: .invalidPlugin, message: "a verb is one or more visible ASCII characters", value: plugin.verb)
        }
        guard !plugin.name.isEmpty, plugin.name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), plugin.name != "all" else {
            throw GateError(code: .invalidPlugin, message: "a name is visible ASCII and not \"all\"", value: plugin.name)
        }
        guard !Self.reservedVerbs.contains(verb) else {
            throw GateError(code: .reservedVerb, message: "the server answers this verb itself", value: verb)
        }
        if plugins.contains(where: { $0.verb == verb || $0.name == plugin.name }) {
            throw GateError(code: .duplicatePlugin, message: "a plugin with this verb or name is registered", value: "\(verb)/\(plugin.name)")
        }
        plugins.append(RegisteredPlugin(plugin, index: plugins.count, budget: budget))
    }

    /// The registered plugins' names, in order.
    public var names: [String] { plugins.map(\.name) }
}

/// An error from the gate runtime: a code, a message and the offending value.
public struct GateError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// Two plugins claim the same verb or name.
        public static let duplicatePlugin = Code(name: "duplicatePlugin")
        /// A plugin claims a verb the server answers itself.
        public static let reservedVerb = Code(name: "reservedVerb")
        /// A plugin's verb or name is malformed.
        public static let invalidPlugin = Code(name: "invalidPlugin")
        /// A server option is out of range.
        public static let invalidConfiguration = Code(name: "invalidConfiguration")
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let message: String
    /// The offending value.
    public let value: String

    /// Creates an error.
    public init(code: Code, message: String, value: String) {
        self.code = code
        self.message = message
        self.value = value
    }

    public var description: String { "GateError(\(code)): \(message) [\(value)]" }
}
