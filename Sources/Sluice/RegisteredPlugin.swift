import SluiceCore

/// A plugin with its types erased, as the gate stores it.
final class RegisteredPlugin: Sendable {
    let index: Int
    let name: String
    let verb: String
    let policy: GatePolicy
    let budget: MemoryBudget
    let counters: [PluginCounter]
    let isCancellable: Bool
    private let prepareRequest: @Sendable (Substring) throws(RequestError) -> PreparedRequest
    private let runEffect: @Sendable (any Sendable, EffectContext) async throws -> PluginReply

    init<Plugin: GatePlugin>(_ plugin: Plugin, index: Int, budget: MemoryBudget) {
        self.index = index
        self.name = plugin.name
        self.verb = plugin.verb.uppercased()
        self.policy = plugin.policy
        self.budget = budget
        self.counters = plugin.counters
        self.isCancellable = plugin.isCancellable
        let idempotent = if case .idempotent = plugin.policy { true } else { false }
        self.prepareRequest = { (arguments: Substring) throws(RequestError) -> PreparedRequest in
            let input = try plugin.parse(arguments)
            return PreparedRequest(
                key: plugin.key(for: input),
                identity: idempotent ? plugin.idempotency(for: input) : nil,
                input: input)
        }
        self.runEffect = { input, context in
            // `prepare` made `input`, so the cast cannot fail.
            let output = try await plugin.handle(input as! Plugin.Input, context: context)
            return plugin.reply(for: output)
        }
    }

    /// Parses a request's arguments into its key, identity and input.
    func prepare(_ arguments: Substring) throws(RequestError) -> PreparedRequest {
        try prepareRequest(arguments)
    }

    /// Runs the effect and formats its reply.
    func run(_ input: any Sendable, context: EffectContext) async throws -> PluginReply {
        try await runEffect(input, context)
    }

    /// Whether effects live in the key's scope rather than the connection's.
    var isKeyScoped: Bool {
        if case .idempotent = policy { return true }
        return false
    }
}

/// A request's arguments as a plugin parsed them.
struct PreparedRequest: Sendable {
    let key: String
    let identity: IdempotencyIdentity?
    let input: any Sendable
}

/// Where a request's single reply goes.
public protocol ReplySink: Sendable {
    /// Sends one reply line (without its LF).
    func send(line: String)
}

/// Who asked: the reply sink, the request id, the connection.
struct Requester: Sendable {
    let sink: any ReplySink
    let requestID: String
    let connectionID: UInt64

    func reply(_ text: String) {
        sink.send(line: "\(requestID) \(text)")
    }
}

/// A parsed request on its way to a shard.
struct GateRequest: Sendable {
    let plugin: RegisteredPlugin
    let prepared: PreparedRequest
    let requester: Requester
}
