import Sluice

/// Search-as-you-type: searches are debounced per key, and a newer search cancels the key's
/// running one (switch-latest).
///
/// A newer search for the key makes a held one `GateOutcome/superseded` at once and a running
/// one `GateOutcome/cancelled(_:)` (`CancellationReason/replaced`); the winner runs the
/// (simulated) search and returns its results. Searches live in their caller's scope: closing it
/// cancels them.
public struct SearchPlugin: GatePlugin {
    /// A search request.
    public struct Search: Sendable, Hashable {
        /// The key (a user or a search box).
        public let key: String
        /// The query.
        public let query: String

        /// A search for `query` in `key`'s search box.
        public init(key: String, query: String) {
            self.key = key
            self.query = query
        }
    }

    public let name = "search"
    public let policy: GatePolicy
    /// How long the simulated search takes.
    public let latency: Duration
    /// Searches that completed.
    public let searches = PluginCounter("searches")

    /// A plugin debouncing with `quiet` and `maxWait`, searching for `latency`.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` for a non-positive quiet period or a
    ///   `maxWait` shorter than it.
    public init(
        quiet: Duration = DebounceOptions.search.quiet,
        maxWait: Duration? = DebounceOptions.search.maxWait,
        latency: Duration = .milliseconds(30)
    ) throws(SluiceError) {
        policy = .debounce(try DebounceOptions(quiet: quiet, maxWait: maxWait), cancelInFlight: true)
        self.latency = latency
    }

    public func key(for input: Search) -> String { input.key }

    /// The results: here, the query itself (a stand-in for a real index).
    public func run(_ input: Search, context: EffectContext) async throws -> String {
        try await context.sleep(for: latency)
        try Task.checkCancellation()
        searches.increment()
        return input.query
    }
}
