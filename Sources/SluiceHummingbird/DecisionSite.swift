#if Hummingbird
import Sluice

/// Where a ``ThrottleRule`` or ``RateLimitRule`` decides.
public enum DecisionSite: Sendable, Hashable {
    /// On the thread that handles the request (a NIO event loop), under a mutex, over a table in
    /// this process's memory: no hop. The default for rules kept in memory (the like-route
    /// benchmark in the README measures it against the gate).
    case inPlace
    /// On the shared `Gate`: one hop to the loop that owns the key and back. The only choice for
    /// a rule kept in a shared store; decisions count in the gate's metrics and statistics.
    case gate

    /// `site`, or the default for `store`; throws when a shared store is asked to decide in
    /// place.
    static func resolve(_ site: DecisionSite?, store: PluginStore, name: String) throws(GateError) -> DecisionSite {
        let shared = store.shared != nil
        let site = site ?? (shared ? .gate : .inPlace)
        if site == .inPlace, shared {
            throw GateError(code: .invalidConfiguration, message: "a rule kept in a shared store decides on the gate", value: name)
        }
        return site
    }
}
#endif
