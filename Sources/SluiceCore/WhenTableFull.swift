/// What a throttle or rate-limit table does when a new key arrives, it is full, and no key it
/// holds is idle.
///
/// Every choice keeps the table within its memory budget; they differ in who pays when a flood
/// of new keys arrives:
///
/// | choice | a live key is | the cost |
/// | --- | --- | --- |
/// | ``forget`` | evicted and forgotten | an evicted key that comes back starts fresh: a throttled or limited key can pass again (counted in `sluice_evictions_total`) |
/// | ``remember`` | evicted and remembered in a fixed-size summary | a key the table does not hold is decided at least as strictly as the summary says; a few never-seen keys in a million are refused (`sluice_summary_refusals_total`), and more, as busy, once the summary overflows (below) |
/// | ``refuse`` | kept | the new key is refused as busy while the table is full |
///
/// With ``remember`` the table gives seven eighths of its byte budget to the summary
/// (a ``RestrictionFilter`` of 4 bytes per remembered key) and keeps an eighth for exact
/// states: a key costs the exact table about 40 bytes, so the summary remembers about 70 keys
/// for each one the exact table would have held in its place (a table with an entry budget and
/// no byte budget keeps its entries and gets a summary of 64 keys per entry).
///
/// Size a remembering table for the keys that can be restricted at once: those that arrive
/// within one window (a throttle's interval, a rate limit's burst window). A summary asked to
/// remember more than about 96 % of its capacity overflows: each restriction it cannot store
/// marks one of its buckets, which then answers for every key that maps to it until that
/// restriction ends (about 2 keys in `bucketCount` per marked bucket). A key only a marker
/// answers for is refused as busy (``SluiceError/Code/tableBusy``: the summary cannot tell it
/// from the keys it lost there), not limited, and the table keeps no entry for it, so it asks
/// again next time. Under a flood larger than the summary, new keys are refused as busy more
/// and more, never let through; the counters `summaryOverflows`,
/// `sluice_summary_overflows_total` and `sluice_summary_refusals_total` show it.
public enum WhenTableFull: String, Hashable, Sendable, CaseIterable {
    /// Evict a live key and forget it (the button-tap throttle's choice: a lost tap is harmless,
    /// a refused one is not).
    case forget
    /// Evict a live key and remember its restriction in the summary (the rate limits' default).
    case remember
    /// Keep every live key; refuse the new key (busy).
    case refuse
}

/// The state of a policy that restricts a key for a while (a throttle's open window, a GCRA's
/// theoretical arrival time ahead of now): what a table needs to remember a key it evicts and
/// to restore it at least as strictly.
public protocol RestrictingState: KeyedState {
    /// The instant until which the state restricts its key, if it does at `now`: a fresh state
    /// made with ``init(restrictedUntil:)`` from this instant (or any later one) decides every
    /// later event at least as strictly as this state. `nil` when the state restricts nothing.
    func restriction(at now: Instant) -> Instant?

    /// A state that restricts its key until `until` and holds nothing else.
    init(restrictedUntil until: Instant)
}
