import Sluice

/// Paging through a key's feed with single-flight loads: while page `n` of a key's feed is
/// loading, every other request for it joins that load and shares its result, as a paging view
/// must never load a page twice at once. Nothing is kept once the load completes.
///
/// A waiter lives in its caller's scope: a caller that goes away leaves the load, which is
/// cancelled only when no waiter remains.
public struct PagePlugin: GatePlugin {
    /// A page request.
    public struct PageRequest: Sendable, Hashable {
        /// The feed's key.
        public let key: String
        /// The page number, 0…``PagePlugin/maximumPage``.
        public let page: Int

        /// Page `page` of `key`'s feed.
        public init(key: String, page: Int) {
            self.key = key
            self.page = page
        }
    }

    /// A loaded page.
    public struct Page: Sendable, Hashable {
        /// The page number.
        public let number: Int
        /// The items' ids.
        public let items: [String]
    }

    public let name = "page"
    public let policy = GatePolicy.singleFlight
    /// How long the simulated load takes.
    public let latency: Duration
    /// Items per page.
    public let pageSize: Int
    /// Loads that completed (joined requests share one).
    public let loads = PluginCounter("page_loads")

    /// The largest page number accepted.
    public static let maximumPage = 1_000_000

    /// A plugin whose simulated loads take `latency` and return `pageSize` items.
    public init(latency: Duration = .milliseconds(50), pageSize: Int = 3) {
        self.latency = latency
        self.pageSize = max(1, pageSize)
    }

    public func key(for input: PageRequest) -> String { input.key }

    public func identity(for input: PageRequest) -> RequestIdentity {
        RequestIdentity(record: "\(input.page) \(input.key)", fingerprint: "")
    }

    /// Loads the page: item `i` of page `n` is `<key>-<n × pageSize + i>`.
    public func run(_ input: PageRequest, context: EffectContext) async throws -> Page {
        try await context.sleep(for: latency)
        try Task.checkCancellation()
        loads.increment()
        let first = input.page * pageSize
        return Page(number: input.page, items: (first..<first + pageSize).map { "\(input.key)-\($0)" })
    }
}
