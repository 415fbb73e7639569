/// Writes ``HTTPRequest``s as HTTP/1.1 bytes for `sluice-echo`'s HTTP front, into a buffer it
/// reuses (no allocation per request once the buffer has grown).
///
/// Every request carries `Host`; a request with a body carries `Content-Length` (0 for a `POST`
/// without one) and `Content-Type`. Keys in paths are percent-encoded (everything but
/// `A–Z a–z 0–9 - . _ ~`), so is the SEARCH query (a space as `%20`, never `+`). No request asks
/// for `Connection: close`: connections are kept alive.
public struct HTTPRequestEncoder: Sendable {
    /// The bytes of the last request encoded.
    public private(set) var bytes: [UInt8] = []
    /// `Host: <host>:<port>` with its CR LF.
    private let hostLine: [UInt8]
    private let keyPrefix: [UInt8]
    private let idemPrefix: [UInt8]
    /// The ECHO body.
    private let echoBody: [UInt8]
    /// A PAY body, built before the head that announces its length.
    private var scratch: [UInt8] = []
    private static let upperHex = Array("0123456789ABCDEF".utf8)
    private static let lowerHex = Array("0123456789abcdef".utf8)

    /// An encoder for requests to `host:port`. A key `n` is named `<keyPrefix><n>`, a payment
    /// pair `p` has the idempotency key `<idemPrefix><p>`; `echoBody` is every ECHO's body.
    public init(host: String, port: Int, keyPrefix: String = "k", idemPrefix: String = "", echoBody: [UInt8] = []) {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        self.hostLine = Array("Host: \(authority)\r\n".utf8)
        self.keyPrefix = Array(keyPrefix.utf8)
        self.idemPrefix = Array(idemPrefix.utf8)
        self.echoBody = echoBody
        bytes.reserveCapacity(512)
        scratch.reserveCapacity(128)
    }

    /// The SEARCH query for tag `tag`: `q<tag>` and a few bytes a query must percent-encode
    /// (a space, `&`, `=`, `+`, `%`, `/`), so the server's decoding is checked too.
    public static func searchQuery(tag: UInt64) -> [UInt8] {
        var query: [UInt8] = [UInt8(ascii: "q")]
        query.appendDecimal(tag)
        query.append(contentsOf: " &=+%/".utf8)
        return query
    }

    /// The idempotency key of pair `pair` (without the quotes of the header field).
    public func idempotencyKey(pair: UInt64) -> [UInt8] {
        var key = idemPrefix
        key.appendDecimal(pair)
        return key
    }

    /// The name of key number `key`.
    public func keyName(_ key: UInt64) -> [UInt8] {
        var name = keyPrefix
        name.appendDecimal(key)
        return name
    }

    /// Encodes `request` into ``bytes``.
    public mutating func encode(_ request: HTTPRequest) {
        bytes.removeAll(keepingCapacity: true)
        switch request {
        case .echo:
            bytes.append(contentsOf: "POST /echo".utf8)
            appendVersionAndHost()
            appendHeadEnd(bodyType: "application/octet-stream", bodyLength: echoBody.count)
            bytes.append(contentsOf: echoBody)
        case .tap(let key):
            bytes.append(contentsOf: "POST /tap/".utf8)
            appendKey(key)
            appendVersionAndHost()
            appendHeadEnd(bodyType: nil, bodyLength: 0)
        case .pay(let key, let pair, let amount):
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: #"{"key":""#.utf8)
            appendJSONStringContent(keyPrefix, to: &scratch)
            scratch.appendDecimal(key)
            scratch.append(contentsOf: #"","amount":"#.utf8)
            scratch.appendDecimal(amount)
            scratch.append(UInt8(ascii: "}"))
            bytes.append(contentsOf: "POST /pay".utf8)
            appendVersionAndHost()
            bytes.append(contentsOf: "Idempotency-Key: \"".utf8)
            // A structured-field string: `\` and `"` escaped.
            for byte in idemPrefix {
                if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
            bytes.appendDecimal(pair)
            bytes.append(contentsOf: "\"\r\n".utf8)
            appendHeadEnd(bodyType: "application/json", bodyLength: scratch.count)
            bytes.append(contentsOf: scratch)
        case .search(let key, let tag):
            bytes.append(contentsOf: "GET /search/".utf8)
            appendKey(key)
            bytes.append(contentsOf: "?q=".utf8)
            appendPercentEncoded(Self.searchQuery(tag: tag))
            appendVersionAndHost()
            appendHeadEnd(bodyType: nil, bodyLength: nil)
        case .limit(let key, let cost):
            bytes.append(contentsOf: "POST /limit/".utf8)
            appendKey(key)
            if let cost {
                bytes.append(contentsOf: "?cost=".utf8)
                if cost < 0 { bytes.append(UInt8(ascii: "-")) }
                bytes.appendDecimal(UInt64(cost.magnitude))
            }
            appendVersionAndHost()
            appendHeadEnd(bodyType: nil, bodyLength: 0)
        case .page(let key, let page):
            bytes.append(contentsOf: "GET /page/".utf8)
            appendKey(key)
            bytes.append(UInt8(ascii: "/"))
            if page < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.appendDecimal(UInt64(page.magnitude))
            appendVersionAndHost()
            appendHeadEnd(bodyType: nil, bodyLength: nil)
        case .metrics:
            bytes.append(contentsOf: "GET /metrics".utf8)
            appendVersionAndHost()
            appendHeadEnd(bodyType: nil, bodyLength: nil)
        }
    }

    /// The end of the request line, then `Host`.
    private mutating func appendVersionAndHost() {
        bytes.append(contentsOf: " HTTP/1.1\r\n".utf8)
        bytes.append(contentsOf: hostLine)
    }

    /// `Content-Type` and `Content-Length` when there is a body (or a `POST` without one:
    /// length 0), then the blank line.
    private mutating func appendHeadEnd(bodyType: String?, bodyLength: Int?) {
        if let bodyType {
            bytes.append(contentsOf: "Content-Type: ".utf8)
            bytes.append(contentsOf: bodyType.utf8)
            bytes.append(contentsOf: "\r\n".utf8)
        }
        if let bodyLength {
            bytes.append(contentsOf: "Content-Length: ".utf8)
            bytes.appendDecimal(UInt64(bodyLength))
            bytes.append(contentsOf: "\r\n".utf8)
        }
        bytes.append(contentsOf: "\r\n".utf8)
    }

    /// Key `key`'s name, percent-encoded as a path segment.
    private mutating func appendKey(_ key: UInt64) {
        appendPercentEncoded(keyPrefix)
        bytes.appendDecimal(key)
    }

    /// `raw` with every byte but the unreserved ones (`A–Z a–z 0–9 - . _ ~`) written `%XX`.
    private mutating func appendPercentEncoded(_ raw: [UInt8]) {
        let hex = Self.upperHex
        for byte in raw {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
    }

    /// `raw` as the content of a JSON string: `"` and `\` escaped, control bytes as `\u00XX`.
    private func appendJSONStringContent(_ raw: [UInt8], to out: inout [UInt8]) {
        let hex = Self.lowerHex
        for byte in raw {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default:
                out.append(byte)
            }
        }
    }
}
