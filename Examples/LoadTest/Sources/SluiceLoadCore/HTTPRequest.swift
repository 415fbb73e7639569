/// A request of `sluice-load`'s HTTP mode, before ``HTTPRequestEncoder`` writes it: one per
/// route of `sluice-echo`'s HTTP front. Keys and idempotency keys are numbers the encoder turns
/// into names with the run's prefixes (`k<n>`, `<nonce>-<pair>`), as the line mode does.
public enum HTTPRequest: Sendable, Hashable {
    /// `POST /echo` with the ECHO text as an `application/octet-stream` body.
    case echo
    /// `POST /tap/<key>`.
    case tap(key: UInt64)
    /// `POST /pay` with `Idempotency-Key: "<idem>"` and `{"key":"<key>","amount":<amount>}`.
    case pay(key: UInt64, pair: UInt64, amount: UInt64)
    /// `GET /search/<key>?q=<query>`, the query being ``HTTPRequestEncoder/searchQuery(tag:)``.
    case search(key: UInt64, tag: UInt64)
    /// `POST /limit/<key>[?cost=<cost>]`.
    case limit(key: UInt64, cost: Int?)
    /// `GET /page/<key>/<page>`.
    case page(key: UInt64, page: Int)
    /// `GET /metrics` (the Prometheus counters read before and after a run).
    case metrics
}
