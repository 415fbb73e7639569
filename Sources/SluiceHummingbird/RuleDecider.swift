#if Hummingbird
import Sluice

/// What decides for a rate-limit or throttle rule: the gate, with the rule's plugin, or the
/// rule's `Table` in this process, in place.
enum RuleDecider<Table>: Sendable {
    /// The gate, with this plugin.
    case gate(PluginHandle<KeyRulePlugin>)
    /// A table in this process, in place.
    case inPlace(InPlaceRule<Table>)

    /// Decides about a request for `key`.
    func decide(_ key: String, on gate: Gate) async -> GateOutcome<Void> {
        switch self {
        case .gate(let handle): await gate.submit(handle, key)
        case .inPlace(let rule): rule.decide(key)
        }
    }
}
#endif
