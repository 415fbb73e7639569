/// What a plugin on a shared store does when the store does not answer (unreachable, or slower
/// than its timeout). Every request tries the store first, so a plugin returns to it by itself
/// once it answers again.
public enum StoreFailureMode: String, Sendable, Hashable, CaseIterable {
    /// Let the request run as if the policy allowed it (throttles and rate limits only: an
    /// idempotent plugin never fails open, it answers ``GateOutcome/unavailable``).
    case open
    /// Refuse the request: ``GateOutcome/unavailable`` (`ERR unavailable`, HTTP 503).
    case closed
    /// Decide with this process's own table, its limits divided by the number of instances so
    /// that the fleet's total stays near the configured one; an idempotent request runs under
    /// the local record and its outcome says so (``RunInfo/Guarantee/local``).
    case local
}
