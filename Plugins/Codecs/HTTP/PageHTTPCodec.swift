import HTTPTypes
import Sluice
import SluiceHTTPCodec
import SluiceLibevent
import SluicePage

/// `GET /page/<key>/<n>` (single-flight) → 200 `{"page":<n>,"items":[…],"shared":<bool>}`
/// (`shared` false for the request that led the load) · 400 `bad-page`.
public struct PageHTTPCodec: HTTPCodec {
    public typealias Plugin = PagePlugin

    public let method = HTTPRequest.Method.get
    public let path = "/page/"

    /// The codec for `plugin`'s requests.
    public init(_ plugin: PagePlugin) {}

    public func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> PagePlugin.PageRequest {
        guard let slash = rest.lastIndex(of: "/") else {
            throw HTTPProblem(.badRequest, "bad-page", detail: "the path is /page/<key>/<n>")
        }
        let key = try HTTPPathKey.decode(rest[..<slash])
        let text = rest[rest.index(after: slash)...]
        guard !text.isEmpty, text.utf8.count <= 7, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let page = Int(text),
            (0...PagePlugin.maximumPage).contains(page)
        else {
            throw HTTPProblem(.badRequest, "bad-page", detail: "the page must be an integer from 0 to \(PagePlugin.maximumPage)")
        }
        return PagePlugin.PageRequest(key: key, page: page)
    }

    public func encode(_ outcome: GateOutcome<PagePlugin.Page>, for input: Plugin.Input) -> HTTPAnswer {
        guard case .ran(let page, let info) = outcome else { return HTTPOutcomeMapping.answer(for: outcome) }
        var json = JSONText()
        json.member("page", page.number)
        json.member("items", strings: page.items)
        json.member("shared", info.source == .joined)
        return .json(.ok, json.finished())
    }
}
