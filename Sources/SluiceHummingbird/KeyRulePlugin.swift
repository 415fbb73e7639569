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

    /// Nothing to run: a request let through is answered at once, in place, with no task.
    func runImmediately(_ input: String, context: EffectContext) throws -> Void? { () }
}
#endif
