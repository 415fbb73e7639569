import Sluice
import SluiceButtonTap
import SluiceLineProtocol

/// `TAP <key>` → `OK tap=<n>` (n: this key's taps that ran) · `THROTTLED retry-after-ms=<n>`.
public struct TapLineCodec: LineCodec {
    public typealias Plugin = ButtonTapPlugin

    public let verb = "TAP"
    public let counters: [PluginCounter]

    /// The codec for `plugin`'s requests; `STATS` reports its `taps`.
    public init(_ plugin: ButtonTapPlugin) {
        counters = [plugin.taps]
    }

    public func decode(_ arguments: Substring) throws(RequestError) -> String {
        guard let fields = RequestLine.fields(arguments, count: 1), let key = RequestLine.key(fields[0]) else {
            throw .usage
        }
        return key
    }

    public func encode(_ output: Int, _ info: RunInfo, into reply: inout LineReply) {
        reply.append("OK tap=")
        reply.append(output)
    }

    /// A tap's effect finishes at once: there is nothing for `CANCEL` to reach.
    public var isCancellable: Bool { false }
}
