/// Why bytes received from an HTTP server are not an HTTP/1.1 response `sluice-load` accepts.
///
/// Every one of these leaves the response stream out of step with the requests sent, so the
/// connection that saw it is closed.
public enum HTTPResponseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The first line is not `HTTP/1.<0|1> <3-digit status 100…599>[ <reason>]`.
    case badStatusLine(String)
    /// A header line is not `<token>:<value>`, holds a stray CR or control byte, or is an
    /// obsolete folded line.
    case badHeaderLine(String)
    /// The head (status line, header lines, blank line) is longer than the limit.
    case headTooLarge(limit: Int)
    /// `Content-Length` is not a decimal number, or two of them disagree.
    case badContentLength(String)
    /// `Content-Length` is above the limit.
    case bodyTooLarge(length: Int, limit: Int)
    /// A `Transfer-Encoding` (chunked bodies): the routes answer with `Content-Length` only.
    case unsupportedTransferEncoding(String)
    /// A response that must have a body carries no `Content-Length` (a body delimited by the
    /// connection's close is not accepted: the connection is kept alive).
    case missingContentLength(status: Int)
    /// `101 Switching Protocols`: no request asks for it.
    case unexpectedUpgrade

    public var description: String {
        switch self {
        case .badStatusLine(let line): "bad status line \"\(line)\""
        case .badHeaderLine(let line): "bad header line \"\(line)\""
        case .headTooLarge(let limit): "response head longer than \(limit) bytes"
        case .badContentLength(let value): "bad Content-Length \"\(value)\""
        case .bodyTooLarge(let length, let limit): "Content-Length \(length) above the limit of \(limit) bytes"
        case .unsupportedTransferEncoding(let value): "unsupported Transfer-Encoding \"\(value)\""
        case .missingContentLength(let status): "status \(status) without Content-Length"
        case .unexpectedUpgrade: "unexpected 101 Switching Protocols"
        }
    }

    /// The first bytes of `bytes` as text for a message (at most 120, control bytes escaped).
    static func excerpt(_ bytes: UnsafeRawBufferPointer) -> String {
        var text = ""
        for byte in bytes.prefix(120) {
            if byte >= 0x20 && byte < 0x7F {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                text += "\\x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
            }
        }
        return bytes.count > 120 ? text + "…" : text
    }
}
