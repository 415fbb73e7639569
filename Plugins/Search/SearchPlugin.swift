import Sluice

/// Search-as-you-type: `SEARCH <key> <query>` is debounced per key, and a newer search cancels
/// the key's running one (switch-latest).
///
/// A newer `SEARCH` for the key makes a pending one reply `SUPERSEDED` at once and a running one
/// reply `CANCELLED`; the winner runs the (simulated) search and replies `OK results=<query>`.
/// Searches live in the connection's scope: closing it cancels them.
public struct SearchPlugin: GatePlugin {
    /// A parsed `SEARCH` request.
    public struct Search: Sendable, Hashable {
        /// The key (a user or a search box).
        public let key: String
        /// The query: the rest of the line.
        public let query: String
    }

    public let name = "search"
    public let verb = "SEARCH"
    public let policy: GatePolicy
    /// How long the simulated search takes.
    public let latency: Duration
    /// Searches that completed (`searches` in `STATS`).
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

    public func parse(_ arguments: Substring) throws(RequestError) -> Search {
        guard let space = arguments.firstIndex(of: " "),
            let key = RequestLine.key(arguments[..<space])
        else { throw .usage }
        let query = arguments[arguments.index(after: space)...]
        guard !query.isEmpty else { throw .usage }
        return Search(key: key, query: String(query))
    }

    public func key(for input: Search) -> String { input.key }

    public func handle(_ input: Search, context: EffectContext) async throws -> String {
        try await context.sleep(for: latency)
        try Task.checkCancellation()
        searches.increment()
        return input.query
    }

    public func reply(for output: String) -> PluginReply {
        PluginReply("OK results=\(output)")
    }

    public var counters: [PluginCounter] { [searches] }
}
