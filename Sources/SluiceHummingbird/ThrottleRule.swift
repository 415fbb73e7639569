#if Hummingbird
import Sluice
import SluiceHTTP

/// A throttle registered in a `PluginRegistry` (the first request of each window per key runs,
/// the others are refused), which ``ThrottleMiddleware`` decides with on a shared `Gate`.
public struct ThrottleRule: Sendable {
    /// What decides.
    let decider: RuleDecider<ThrottleTable<String>>
    /// Where the rule decides.
    public let site: DecisionSite
    /// The fields of the rule: `RateLimit-Policy: "<name>";q=1;w=<window>`.
    public let fields: RateLimitFields
    /// The window.
    public let window: Duration

    /// A throttle named `name`: one request per `window` per key, decided where `site` says
    /// (registered in `plugins` when that is the gate).
    ///
    /// - Parameters:
    ///   - name: the policy's name in the fields (and the plugin's, on the gate): 1–64
    ///     characters of `a–z 0–9 _ - .`; on the gate, unique in the registry.
    ///   - window: the window; a key's first request in it wins.
    ///   - site: where it decides; `nil`: in place for the memory store, on the gate for a
    ///     shared one.
    ///   - store: where the throttle's state lives: this process's memory, or a shared store
    ///     (decided on the gate only).
    ///   - budget: the memory its keys may hold in this process (when full, the least recently
    ///     used key goes).
    ///   - clock: where a rule decided in place reads the time (a test's manual clock); `nil`:
    ///     the monotonic clock. The gate's decisions read the gate's clock.
    ///   - plugins: the registry the gate will be made from.
    /// - Throws: `GateError` when the name is malformed or taken, the window is not positive,
    ///   the budget cannot hold a key, or a shared store is asked to decide in place.
    public init(
        name: String, window: Duration, site: DecisionSite? = nil, store: PluginStore = .memory,
        budget: MemoryBudget = .bytes(16 << 20), clock: (any GateClock)? = nil, in plugins: inout PluginRegistry
    ) throws(GateError) {
        try RuleName.check(name)
        let site = try DecisionSite.resolve(site, store: store, name: name)
        do {
            let options = try ThrottleOptions(interval: window, leading: true, trailing: false)
            switch site {
            case .gate:
                decider = .gate(try plugins.register(KeyRulePlugin(name: name, policy: .throttle(options)), budget: budget, store: store))
            case .inPlace:
                decider = .inPlace(try InPlaceRule.throttle(name: name, options: options, budget: budget, clock: InPlaceClock(clock)))
            }
        } catch let error as GateError {
            throw error
        } catch let error as SluiceError {
            throw GateError(code: .invalidConfiguration, message: error.message, value: error.value)
        } catch {
            throw GateError(code: .invalidConfiguration, message: "\(error)", value: name)
        }
        self.site = site
        fields = .throttle(name: name, window: window)
        self.window = window
    }

    /// Decides about a request for `key`.
    func decide(_ key: String, on gate: Gate) async -> GateOutcome<Void> {
        await decider.decide(key, on: gate)
    }
}
#endif
