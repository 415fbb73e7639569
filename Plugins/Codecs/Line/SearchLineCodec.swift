import Sluice
import SluiceLineProtocol
import SluiceSearch

/// `SEARCH <key> <query>` (query: the rest of the line, no CR) → `OK results=<query>` ·
/// `SUPERSEDED` · `CANCELLED`.
public struct SearchLineCodec: LineCodec {
    public typealias Plugin = SearchPlugin

    public let verb = "SEARCH"
    public let counters: [PluginCounter]

    /// The codec for `plugin`'s requests; `STATS` reports its `searches`.
    public init(_ plugin: SearchPlugin) {
        counters = [plugin.searches]
    }

    public func decode(_ arguments: Substring) throws(RequestError) -> SearchPlugin.Search {
        guard let space = arguments.firstIndex(of: " "), let key = RequestLine.key(arguments[..<space]) else {
            throw .usage
        }
        let query = arguments[arguments.index(after: space)...]
        // A CR could not be written back in the one-line reply.
        guard !query.isEmpty, !query.utf8.contains(0x0D) else { throw .usage }
        return SearchPlugin.Search(key: key, query: String(query))
    }

    public func encode(_ output: String, _ info: RunInfo, into reply: inout LineReply) {
        reply.append("OK results=")
        reply.append(output)
    }
}
