import HTTPTypes

/// Where a request ``HTTPRequestParser`` accepted lies in the bytes it was fed, and what its head
/// said about the connection: offsets and flags only, nothing copied.
public struct HTTPParsedRequest: Sendable, Hashable {
    /// The protocol version of the request line.
    public enum Version: Sendable, Hashable {
        case http10
        case http11
    }

    /// Where the body lies.
    public enum Body: Sendable, Hashable {
        /// No body (no `Content-Length`, or 0).
        case empty
        /// `Content-Length` bytes at this range of the message.
        case range(Range<Int>)
        /// A chunked body whose framing and data lie at this range, holding `dataCount` bytes
        /// of data.
        case chunked(Range<Int>, dataCount: Int)
    }

    /// The method.
    public let method: HTTPRequest.Method
    /// Where the request target lies.
    public let target: Range<Int>
    /// The version.
    public let version: Version
    /// The head's length, through the blank line that ends it.
    public let headLength: Int
    /// The whole message's length: what to consume before the next request.
    public let messageLength: Int
    /// The body.
    public let body: Body
    /// Whether the connection stays open after the answer (HTTP/1.1 unless `Connection: close`;
    /// HTTP/1.0 only with `Connection: keep-alive`; never after a request that asks to upgrade).
    public let keepAlive: Bool
    /// Whether the request carries `Upgrade` (this server upgrades nothing; the connection closes
    /// after the answer, so bytes after it are never read as another protocol's).
    public let hasUpgrade: Bool
    /// Whether the request carries `Expect: 100-continue`.
    public let expectsContinue: Bool

    /// The number of bytes of body data.
    public var bodyCount: Int {
        switch body {
        case .empty: 0
        case .range(let range): range.count
        case .chunked(_, let dataCount): dataCount
        }
    }
}
