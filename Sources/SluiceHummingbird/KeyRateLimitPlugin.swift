#if Hummingbird
import Sluice

/// The plugin behind a ``RateLimitRule``: a GCRA limit on the key the middleware's closure
/// gave; nothing runs but the decision.
struct KeyRateLimitPlugin: GatePlugin {
    let name: String
    let policy: GatePolicy

    init(name: String, options: RateLimitOptions) {
        self.name = name
        self.policy = .rateLimit(options)
    }

    func key(for input: String) -> String { input }

    func run(_ input: String, context: EffectContext) async throws {}
}
#endif
