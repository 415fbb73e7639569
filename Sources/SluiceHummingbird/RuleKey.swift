#if Hummingbird
import Hummingbird
import SluiceHTTPCodec

/// The keys the middleware's closures return: 1 to ``maximumBytes`` bytes of UTF-8, so that
/// unique long values (a multi-kilobyte `Authorization` field, say) cannot fill a table's
/// byte budget with a few keys each.
enum RuleKey {
    /// The longest key, in UTF-8 bytes.
    static let maximumBytes = 256

    /// `nil` for a key of 1 to ``maximumBytes`` bytes; otherwise the answer to the request:
    /// 400 `bad-key`, and nothing runs (a refusal, for an idempotency middleware in front).
    static func refusal(for key: String) -> Response? {
        guard !(1...maximumBytes).contains(key.utf8.count) else { return nil }
        // The route does not run: an idempotency middleware in front releases its record.
        InnerRefusal.mark()
        return HTTPProblem(
            .badRequest, "bad-key",
            detail: "what this request is keyed by is empty or longer than \(maximumBytes) bytes").answer.response
    }
}
#endif
