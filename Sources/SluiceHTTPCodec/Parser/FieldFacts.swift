import HTTPTypes

/// What ``HTTPRequestParser`` learns from a head's field lines as it validates them: the
/// framing fields, `Host`, `Connection`, `Expect` and `Upgrade`. Nothing is copied: the lines
/// stay in the connection's buffer, and a codec reads the fields it wants from there.
struct FieldFacts: Sendable {
    /// How the body is framed.
    enum Framing: Sendable, Hashable {
        case none
        case contentLength(Int)
        case chunked
    }

    private var contentLengthLines = 0
    /// The Content-Length value, or `Int.max` when it has more digits than fit.
    private var contentLength = 0
    private var transferEncodingLines = 0
    private var chunkedCodings = 0
    private var otherCodings = 0
    private var lastCodingIsChunked = false
    private var hostLines = 0
    private var connectionClose = false
    private var connectionKeepAlive = false
    private(set) var hasUpgrade = false
    private(set) var expectsContinue = false
    private var unsupportedExpectation = false
    /// The framing, once ``check(version:maximumBodyBytes:)`` has accepted the head.
    private(set) var framing = Framing.none

    /// Validates one field line (without its CRLF) and records what it says. `trailer` lines
    /// (after a chunked body) are validated only. Returns the problem that refuses it, if any.
    mutating func add(_ line: UnsafeRawBufferPointer, maximumBodyBytes: Int, trailer: Bool = false) -> HTTPProblem? {
        if line[0] == HTTPBytes.space || line[0] == HTTPBytes.tab {
            return HTTPProblem(.badRequest, "obs-fold", detail: "a field line starts with whitespace (line folding is not accepted)")
        }
        var colon = 0
        while colon < line.count, HTTPBytes.isToken(line[colon]) { colon += 1 }
        guard colon < line.count, line[colon] == HTTPBytes.colon else {
            if colon < line.count, line[colon] == HTTPBytes.space || line[colon] == HTTPBytes.tab {
                return HTTPProblem(.badRequest, "space-before-colon", detail: "a field name is followed by whitespace before its colon")
            }
            return HTTPProblem(.badRequest, "bad-field-name", detail: "a field line does not start with a token and a colon")
        }
        guard colon > 0 else {
            return HTTPProblem(.badRequest, "bad-field-name", detail: "a field line has an empty name")
        }
        // The value: OWS around it is not part of it.
        var start = colon + 1
        var end = line.count
        while start < end, line[start] == HTTPBytes.space || line[start] == HTTPBytes.tab { start += 1 }
        while end > start, line[end - 1] == HTTPBytes.space || line[end - 1] == HTTPBytes.tab { end -= 1 }
        for index in start..<end where !HTTPBytes.isFieldValue(line[index]) {
            let byte = line[index]
            return HTTPProblem(
                .badRequest, "bad-field-value",
                detail: "a field value holds a control character (0x\(String(byte, radix: 16)))")
        }
        let name = UnsafeRawBufferPointer(rebasing: line[0..<colon])
        let framing = HTTPBytes.equalsIgnoringCase(name, "content-length") || HTTPBytes.equalsIgnoringCase(name, "transfer-encoding")
        if trailer {
            // A trailer never frames anything; one that names a framing field is what another
            // parser might merge into the head (llhttp refuses it too).
            return framing
                ? HTTPProblem(.badRequest, "bad-trailer", detail: "a trailer section carries no Content-Length or Transfer-Encoding")
                : nil
        }
        if framing, line[(colon + 1)...].contains(HTTPBytes.tab) {
            // Tabs around a framing value are read differently by different parsers.
            return HTTPProblem(
                .badRequest, HTTPBytes.equalsIgnoringCase(name, "content-length") ? "bad-content-length" : "bad-transfer-encoding",
                detail: "a framing field's value holds a tab")
        }
        let value = UnsafeRawBufferPointer(rebasing: line[start..<end])
        switch name.count {
        case 4 where HTTPBytes.equalsIgnoringCase(name, "host"):
            hostLines += 1
            return Self.checkHost(value)
        case 6 where HTTPBytes.equalsIgnoringCase(name, "expect"):
            if HTTPBytes.equalsIgnoringCase(value, "100-continue") {
                expectsContinue = true
            } else {
                unsupportedExpectation = true
            }
        case 7 where HTTPBytes.equalsIgnoringCase(name, "upgrade"):
            hasUpgrade = true
        case 10 where HTTPBytes.equalsIgnoringCase(name, "connection"):
            return addConnectionOptions(value)
        case 14 where HTTPBytes.equalsIgnoringCase(name, "content-length"):
            contentLengthLines += 1
            return addContentLength(value)
        case 17 where HTTPBytes.equalsIgnoringCase(name, "transfer-encoding"):
            transferEncodingLines += 1
            return addTransferCodings(value)
        default:
            break
        }
        return nil
    }

    /// Checks what only the whole head shows and settles the framing.
    mutating func check(version: HTTPParsedRequest.Version, maximumBodyBytes: Int) -> HTTPProblem? {
        if version == .http11 && hostLines == 0 {
            return HTTPProblem(.badRequest, "missing-host", detail: "an HTTP/1.1 request carries a Host field")
        }
        if hostLines > 1 {
            return HTTPProblem(.badRequest, "duplicate-host", detail: "a request carries one Host field")
        }
        if contentLengthLines > 1 {
            return HTTPProblem(.badRequest, "duplicate-content-length", detail: "a request carries one Content-Length field")
        }
        if transferEncodingLines > 0 {
            if version == .http10 {
                return HTTPProblem(
                    .badRequest, "transfer-encoding-http10", detail: "an HTTP/1.0 request cannot be framed by Transfer-Encoding")
            }
            if contentLengthLines > 0 {
                return HTTPProblem(
                    .badRequest, "content-length-and-transfer-encoding",
                    detail: "a request carries Content-Length or Transfer-Encoding, never both")
            }
            guard chunkedCodings == 1, lastCodingIsChunked else {
                return HTTPProblem(
                    .badRequest, "bad-transfer-encoding", detail: "chunked must be the last transfer coding, once")
            }
            if otherCodings > 0 {
                return HTTPProblem(
                    .notImplemented, "unsupported-transfer-encoding", detail: "this server reads no transfer coding but chunked")
            }
            framing = .chunked
        } else if contentLengthLines == 1 {
            guard contentLength <= maximumBodyBytes else { return HTTPRequestParser.bodyTooLarge(maximumBodyBytes) }
            framing = contentLength > 0 ? .contentLength(contentLength) : .none
        }
        if unsupportedExpectation {
            return HTTPProblem(
                HTTPResponse.Status(code: 417, reasonPhrase: "Expectation Failed"), "unsupported-expectation",
                detail: "this server meets only the expectation 100-continue")
        }
        return nil
    }

    /// Whether the connection stays open after this request.
    func keepAlive(version: HTTPParsedRequest.Version) -> Bool {
        if connectionClose || hasUpgrade { return false }
        return version == .http11 || connectionKeepAlive
    }

    private mutating func addContentLength(_ value: UnsafeRawBufferPointer) -> HTTPProblem? {
        guard !value.isEmpty else {
            return HTTPProblem(.badRequest, "bad-content-length", detail: "Content-Length is empty")
        }
        // More digits than any length needs is a value parsers overflow differently.
        guard value.count <= 19 else {
            return HTTPProblem(.badRequest, "bad-content-length", detail: "Content-Length has more than 19 digits")
        }
        var length = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else {
                return HTTPProblem(.badRequest, "bad-content-length", detail: "Content-Length is digits only")
            }
            let (times, overflow) = length.multipliedReportingOverflow(by: 10)
            let (plus, overflowAgain) = times.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            length = overflow || overflowAgain ? Int.max : plus
        }
        contentLength = length
        return nil
    }

    /// Reads a `Transfer-Encoding` list: tokens separated by commas with optional whitespace,
    /// no empty element and no parameter.
    private mutating func addTransferCodings(_ value: UnsafeRawBufferPointer) -> HTTPProblem? {
        let bad = HTTPProblem(.badRequest, "bad-transfer-encoding", detail: "Transfer-Encoding is a list of transfer codings")
        var index = 0
        var elements = 0
        while true {
            while index < value.count, value[index] == HTTPBytes.space || value[index] == HTTPBytes.tab { index += 1 }
            let start = index
            while index < value.count, HTTPBytes.isToken(value[index]) { index += 1 }
            guard index > start else { return bad }
            let coding = UnsafeRawBufferPointer(rebasing: value[start..<index])
            elements += 1
            if HTTPBytes.equalsIgnoringCase(coding, "chunked") {
                chunkedCodings += 1
                lastCodingIsChunked = true
            } else {
                otherCodings += 1
                lastCodingIsChunked = false
            }
            while index < value.count, value[index] == HTTPBytes.space || value[index] == HTTPBytes.tab { index += 1 }
            if index == value.count { break }
            guard value[index] == UInt8(ascii: ",") else { return bad }
            index += 1
        }
        return elements > 0 ? nil : bad
    }

    /// Reads a `Connection` list of options (tokens).
    private mutating func addConnectionOptions(_ value: UnsafeRawBufferPointer) -> HTTPProblem? {
        let bad = HTTPProblem(.badRequest, "bad-connection", detail: "Connection is a list of tokens")
        var index = 0
        while true {
            while index < value.count, value[index] == HTTPBytes.space || value[index] == HTTPBytes.tab { index += 1 }
            let start = index
            while index < value.count, HTTPBytes.isToken(value[index]) { index += 1 }
            guard index > start else { return bad }
            let option = UnsafeRawBufferPointer(rebasing: value[start..<index])
            if HTTPBytes.equalsIgnoringCase(option, "close") {
                connectionClose = true
            } else if HTTPBytes.equalsIgnoringCase(option, "keep-alive") {
                connectionKeepAlive = true
            }
            while index < value.count, value[index] == HTTPBytes.space || value[index] == HTTPBytes.tab { index += 1 }
            if index == value.count { return nil }
            guard value[index] == UInt8(ascii: ",") else { return bad }
            index += 1
        }
    }

    /// A `Host` value: `uri-host [":" port]` (RFC 9110 §7.2), not empty.
    private static func checkHost(_ value: UnsafeRawBufferPointer) -> HTTPProblem? {
        let bad = HTTPProblem(.badRequest, "bad-host", detail: "Host is a host name or address and an optional port")
        guard !value.isEmpty, value.allSatisfy(HTTPBytes.isHost) else { return bad }
        var portStart: Int?
        if value[0] == UInt8(ascii: "[") {
            // An IP literal: [ ... ] then an optional port.
            guard let close = value.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return bad }
            for index in 1..<close where value[index] == UInt8(ascii: "[") { return bad }
            if close + 1 < value.count {
                guard value[close + 1] == HTTPBytes.colon else { return bad }
                portStart = close + 2
            }
        } else {
            guard !value.contains(UInt8(ascii: "[")), !value.contains(UInt8(ascii: "]")) else { return bad }
            if let colon = value.firstIndex(of: HTTPBytes.colon) {
                guard colon > 0 else { return bad }
                portStart = colon + 1
            }
        }
        if let portStart {
            for index in portStart..<value.count where !(value[index] >= UInt8(ascii: "0") && value[index] <= UInt8(ascii: "9")) {
                return bad
            }
        }
        return nil
    }
}
