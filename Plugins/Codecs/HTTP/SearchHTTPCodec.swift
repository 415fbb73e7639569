import HTTPTypes
import Sluice
import SluiceHTTPCodec
import SluiceLibevent
import SluiceSearch

/// `GET /search/<key>?q=<query>` (debounce, then switch-latest) → 200 `{"results":"<query>"}` ·
/// 409 `superseded` (a newer search for the key replaced it) · 400 `bad-query`.
public struct SearchHTTPCodec: HTTPCodec {
    public typealias Plugin = SearchPlugin

    public let method = HTTPRequest.Method.get
    public let path = "/search/"
    /// The longest query accepted, in bytes.
    public static let maximumQueryLength = 4096

    /// The codec for `plugin`'s requests.
    public init(_ plugin: SearchPlugin) {}

    public func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> SearchPlugin.Search {
        let key = try HTTPPathKey.decode(rest)
        guard let query = HTTPPathKey.queryValue("q", in: request.query?[...]), !query.isEmpty,
            query.utf8.count <= Self.maximumQueryLength
        else {
            throw HTTPProblem(.badRequest, "bad-query", detail: "a search needs q, 1 to \(Self.maximumQueryLength) bytes of UTF-8")
        }
        return SearchPlugin.Search(key: key, query: query)
    }

    public func encode(_ outcome: GateOutcome<String>, for input: Plugin.Input) -> HTTPAnswer {
        guard case .ran(let results, _) = outcome else { return HTTPOutcomeMapping.answer(for: outcome) }
        var json = JSONText()
        json.member("results", results)
        return .json(.ok, json.finished())
    }
}
