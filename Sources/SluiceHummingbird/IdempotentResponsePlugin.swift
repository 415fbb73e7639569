#if Hummingbird
import Sluice

/// The plugin behind an ``IdempotencyRule``: its effect is the rest of the middleware chain,
/// and its output the response that chain produced, stored and replayed.
struct IdempotentResponsePlugin: GatePlugin {
    /// A request: its key (what the middleware's closure gave), its record and fingerprint, and
    /// the chain to run when it leads.
    struct Call: Sendable {
        let key: String
        let identity: RequestIdentity
        let chain: ChainCall
    }

    let name: String
    let policy: GatePolicy

    init(name: String, options: IdempotencyOptions) {
        self.name = name
        self.policy = .idempotent(options)
    }

    func key(for input: Call) -> String { input.key }

    func identity(for input: Call) -> RequestIdentity { input.identity }

    func run(_ input: Call, context: EffectContext) async throws -> StoredResponse {
        try await input.chain.run()
    }

    /// A refusal is not kept (by Sluice's own rate limit or throttle behind the middleware, or
    /// a status of the options' `unstoredStatuses`: the request's own shape), so that a retry
    /// is decided again. Every other answer is kept whatever its status: a 503 or 500 the route
    /// itself gave may follow a charge.
    func isFailure(_ output: StoredResponse) -> Bool {
        output.refusal
    }
}
#endif
