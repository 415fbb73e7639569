import Sluice
import SluiceLineProtocol
import SluicePage

/// `PAGE <key> <n>` → `OK page=<n> items=<id>,<id>,… shared=<true|false>` (`shared=false` for
/// the request that led the load, `true` for those that joined it) · `CANCELLED`; `ERR bad-page`
/// for a page that is not an integer 0…1,000,000.
public struct PageLineCodec: LineCodec {
    public typealias Plugin = PagePlugin

    public let verb = "PAGE"

    /// The codec for `plugin`'s requests.
    public init(_ plugin: PagePlugin) {}

    public func decode(_ arguments: Substring) throws(RequestError) -> PagePlugin.PageRequest {
        guard let fields = RequestLine.fields(arguments, count: 2), let key = RequestLine.key(fields[0]) else {
            throw .usage
        }
        guard let page = RequestLine.integer(fields[1], in: 0...PagePlugin.maximumPage) else {
            throw .invalid("bad-page", message: "the page must be an integer from 0 to \(PagePlugin.maximumPage)")
        }
        return PagePlugin.PageRequest(key: key, page: page)
    }

    public func encode(_ output: PagePlugin.Page, _ info: RunInfo, into reply: inout LineReply) {
        reply.append("OK page=")
        reply.append(output.number)
        reply.append(" items=")
        for (index, item) in output.items.enumerated() {
            if index > 0 { reply.append(",") }
            reply.append(item)
        }
        reply.append(" shared=")
        reply.append(info.source == .joined)
    }
}
