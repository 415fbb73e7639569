#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Splits a byte stream from an HTTP/1.1 server into responses: the status line, the header
/// fields (names compared case-insensitively), and a body of `Content-Length` bytes.
///
/// Like `LineFramer`, the parser holds no buffer of its own: the caller feeds it the bytes it
/// has, and it says how many it consumed (whole responses only); the rest (an incomplete
/// response) must be fed again with more data behind it. What the caller has to keep is bounded
/// by ``maximumBufferedBytes``: a head longer than ``maximumHeadBytes`` and a `Content-Length`
/// above ``maximumBodyBytes`` are errors as soon as they are seen, and a first line that cannot
/// be a status line fails as soon as it is complete (or its first bytes differ from `HTTP/1.`).
///
/// Accepted: `HTTP/1.1` and `HTTP/1.0` status lines with or without a reason phrase, lines
/// ended by CR LF or a bare LF, interim `1xx` responses (skipped), `204` and `304` without a
/// body. Refused: chunked or other transfer codings, a body without `Content-Length` (one
/// delimited by the close of the connection), obsolete line folding, a space before a field's
/// colon, control bytes in a field, `101 Switching Protocols`.
public struct HTTPResponseParser: Sendable {
    /// What the bytes at the start of the input hold.
    public enum Step {
        /// Not a whole response yet: feed these bytes again with more behind them.
        case incomplete
        /// An interim (`1xx`) response of `length` bytes, to be skipped.
        case interim(length: Int)
        /// A whole response of `length` bytes (head and body).
        case response(HTTPResponseView, length: Int)
    }

    /// The longest head accepted: status line, header lines and the blank line, in bytes.
    public let maximumHeadBytes: Int
    /// The largest `Content-Length` accepted.
    public let maximumBodyBytes: Int

    /// The most bytes a caller ever has to keep for one response.
    public var maximumBufferedBytes: Int { maximumHeadBytes + maximumBodyBytes }

    /// A parser with the given limits (each at least 1).
    public init(maximumHeadBytes: Int = 32 << 10, maximumBodyBytes: Int = 4 << 20) {
        precondition(maximumHeadBytes >= 1 && maximumBodyBytes >= 1, "the limits must be positive")
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumBodyBytes = maximumBodyBytes
    }

    /// Feeds `bytes`: calls `onResponse` for each whole response, in order, until it returns
    /// `false`; interim responses are skipped. Returns how many bytes were consumed (always a
    /// prefix of `bytes` ending at a response's end).
    ///
    /// - Throws: ``HTTPResponseError`` when the bytes are not a response; the responses before
    ///   it have been handed over, and the stream cannot be read any further.
    public func consume(
        _ bytes: UnsafeRawBufferPointer, _ onResponse: (HTTPResponseView) -> Bool
    ) throws(HTTPResponseError) -> Int {
        var offset = 0
        while offset < bytes.count {
            switch try parse(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .incomplete:
                return offset
            case .interim(let length):
                offset += length
            case .response(let response, let length):
                offset += length
                if !onResponse(response) { return offset }
            }
        }
        return offset
    }

    /// Parses the response at the start of `bytes`.
    public func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTPResponseError) -> Step {
        // The status line: checked as soon as it is complete, or as soon as its first bytes
        // cannot start one.
        guard let statusNewline = bytes.firstLineFeed(from: 0), statusNewline < maximumHeadBytes else {
            if bytes.count >= maximumHeadBytes { throw .headTooLarge(limit: maximumHeadBytes) }
            let prefix = Self.versionPrefix.prefix(bytes.count)
            if !bytes.prefix(prefix.count).elementsEqual(prefix) {
                throw .badStatusLine(HTTPResponseError.excerpt(bytes))
            }
            return .incomplete
        }
        let statusLine = Self.content(of: bytes, from: 0, to: statusNewline)
        let (status, minorVersion, reason) = try Self.statusLine(statusLine)

        // The end of the head: the first empty line, within the limit.
        var lineStart = statusNewline + 1
        var headEnd: Int?
        while lineStart < bytes.count, let newline = bytes.firstLineFeed(from: lineStart), newline < maximumHeadBytes {
            if Self.content(of: bytes, from: lineStart, to: newline).isEmpty {
                headEnd = newline + 1
                break
            }
            lineStart = newline + 1
        }
        guard let headEnd else {
            if bytes.count >= maximumHeadBytes { throw .headTooLarge(limit: maximumHeadBytes) }
            return .incomplete
        }
        let fieldsEnd = lineStart
        let fields = UnsafeRawBufferPointer(rebasing: bytes[(statusNewline + 1)..<fieldsEnd])
        let framing = try Self.framing(of: fields)

        if status < 200 {
            if status == 101 { throw .unexpectedUpgrade }
            return .interim(length: headEnd)
        }
        var bodyLength = 0
        if status != 204 && status != 304 {
            guard let length = framing.contentLength else { throw .missingContentLength(status: status) }
            guard length <= maximumBodyBytes else { throw .bodyTooLarge(length: length, limit: maximumBodyBytes) }
            bodyLength = length
        }
        guard bytes.count - headEnd >= bodyLength else { return .incomplete }
        let response = HTTPResponseView(
            status: status, minorVersion: minorVersion, reason: reason, fields: fields,
            body: UnsafeRawBufferPointer(rebasing: bytes[headEnd..<(headEnd + bodyLength)]),
            closesConnection: framing.close || (minorVersion == 0 && !framing.keepAlive))
        return .response(response, length: headEnd + bodyLength)
    }

    // MARK: The status line

    private static let versionPrefix = Array("HTTP/1.".utf8)

    /// `HTTP/1.<0|1> <ddd>[ <reason>]`: the status, the minor version and the reason.
    private static func statusLine(
        _ line: UnsafeRawBufferPointer
    ) throws(HTTPResponseError) -> (status: Int, minorVersion: Int, reason: UnsafeRawBufferPointer) {
        let bad = HTTPResponseError.badStatusLine(HTTPResponseError.excerpt(line))
        // "HTTP/1.1 200" is the shortest.
        guard line.count >= 12, line.prefix(7).elementsEqual(versionPrefix) else { throw bad }
        let minor = line[7]
        guard minor == UInt8(ascii: "0") || minor == UInt8(ascii: "1"), line[8] == 0x20 else { throw bad }
        var status = 0
        for index in 9..<12 {
            let digit = line[index]
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { throw bad }
            status = status * 10 + Int(digit - UInt8(ascii: "0"))
        }
        guard (100...599).contains(status) else { throw bad }
        if line.count == 12 {
            return (status, Int(minor - UInt8(ascii: "0")), UnsafeRawBufferPointer(rebasing: line[12...]))
        }
        guard line[12] == 0x20 else { throw bad }
        let reason = UnsafeRawBufferPointer(rebasing: line[13...])
        guard reason.allSatisfy(isFieldByte) else { throw bad }
        return (status, Int(minor - UInt8(ascii: "0")), reason)
    }

    // MARK: Header fields

    /// What the header fields say about the message's framing.
    private struct Framing {
        var contentLength: Int?
        var close = false
        var keepAlive = false
    }

    /// Checks every header line of `fields` and reads `Content-Length`, `Transfer-Encoding` and
    /// `Connection`.
    private static func framing(of fields: UnsafeRawBufferPointer) throws(HTTPResponseError) -> Framing {
        var framing = Framing()
        var start = 0
        while start < fields.count {
            let newline = fields.firstLineFeed(from: start) ?? fields.count
            let line = content(of: fields, from: start, to: newline)
            start = newline + 1
            let bad = HTTPResponseError.badHeaderLine(HTTPResponseError.excerpt(line))
            // A line starting with a space or tab continues the previous one (obsolete folding).
            guard let first = line.first, first != 0x20, first != 0x09,
                let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0
            else { throw bad }
            let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
            let rawValue = UnsafeRawBufferPointer(rebasing: line[(colon + 1)...])
            guard name.allSatisfy(isTokenByte), rawValue.allSatisfy(isFieldByte) else { throw bad }
            let value = HTTPResponseView.trimmed(rawValue)
            if HTTPResponseView.equalsIgnoringCase(name, "content-length") {
                guard let length = decimal(value) else {
                    throw .badContentLength(HTTPResponseError.excerpt(value))
                }
                if let known = framing.contentLength, known != length {
                    throw .badContentLength("\(known) and \(length)")
                }
                framing.contentLength = length
            } else if HTTPResponseView.equalsIgnoringCase(name, "transfer-encoding") {
                throw .unsupportedTransferEncoding(HTTPResponseError.excerpt(value))
            } else if HTTPResponseView.equalsIgnoringCase(name, "connection") {
                for option in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
                    let token = HTTPResponseView.trimmed(UnsafeRawBufferPointer(rebasing: option))
                    if HTTPResponseView.equalsIgnoringCase(token, "close") { framing.close = true }
                    if HTTPResponseView.equalsIgnoringCase(token, "keep-alive") { framing.keepAlive = true }
                }
            }
        }
        return framing
    }

    /// 1 to 18 decimal digits (no sign, no spaces) as a number.
    private static func decimal(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// A `tchar` of RFC 9110: the bytes a field name is made of.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// A byte a field value or a reason phrase may hold: tab, space, visible ASCII, or
    /// `obs-text` (0x80 and up). No CR, LF, NUL or other control byte.
    private static func isFieldByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    /// The line `bytes[from..<to]` without the CR before its LF (at `to`).
    private static func content(of bytes: UnsafeRawBufferPointer, from start: Int, to newline: Int) -> UnsafeRawBufferPointer {
        var end = newline
        if end > start && bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }
}

extension UnsafeRawBufferPointer {
    /// The index of the first LF at or after `start`, if any.
    func firstLineFeed(from start: Int) -> Int? {
        guard start < count, let base = baseAddress else { return nil }
        guard let found = memchr(base + start, 0x0A, count - start) else { return nil }
        return UnsafeRawPointer(found) - base
    }
}
