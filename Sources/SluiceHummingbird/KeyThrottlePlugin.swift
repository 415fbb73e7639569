#if Hummingbird
import Sluice

/// The plugin behind a ``ThrottleRule``: a leading-only throttle on the key the middleware's
/// closure gave; nothing runs but the decision.
struct KeyThrottlePlugin: GatePlugin {
    let name: String
    let policy: GatePolicy

    init(name: String, options: ThrottleOptions) {
        self.name = name
        self.policy = .throttle(options)
    }

    func key(for input: String) -> String { input }

    func run(_ input: String, context: EffectContext) async throws {}
}
#endif
