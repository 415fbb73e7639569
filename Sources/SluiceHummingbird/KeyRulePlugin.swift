#if Hummingbird
import Sluice

/// The plugin behind a rule decided on the gate (a ``RateLimitRule``'s GCRA limit, a
/// ``ThrottleRule``'s leading-only throttle): its policy on the key the middleware's closure
/// gave; nothing runs but the decision.
struct KeyRulePlugin: GatePlugin {
    let name: String
    let policy: GatePolicy

    func key(for input: String) -> String { input }

    func run(_ input: String, context: EffectContext) async throws {}
}
#endif
