import HTTPTypes
import PropertyBased
import SluiceHTTP
import Testing

/// What the parser made of a byte stream: the requests it accepted, in order, then how it
/// stopped.
struct ParsedStream: Equatable, CustomStringConvertible {
    struct Request: Equatable {
        var method: String
        var target: String
        var body: [UInt8]
        var keepAlive: Bool
    }

    enum End: Equatable {
        /// Every byte was consumed.
        case clean
        /// The last request was incomplete.
        case incomplete
        /// Refused with this status and slug.
        case refused(Int, String)
    }

    var requests: [Request] = []
    var end = End.clean

    var description: String {
        requests.map { "\($0.method) \($0.target) [\($0.body.count) B]" }.joined(separator: ", ") + " → \(end)"
    }

    /// Parses `bytes` as a connection's input, request after request. `step` feeds the bytes a
    /// few at a time (as a slow peer sends them) rather than all at once.
    static func parse(_ bytes: [UInt8], limits: HTTPRequestParser.Limits = .init(), step: Int? = nil) -> ParsedStream {
        var parser = HTTPRequestParser(limits: limits)
        var stream = ParsedStream()
        var consumed = 0
        var available = step.map { min($0, bytes.count) } ?? bytes.count
        while true {
            let result = bytes.withUnsafeBytes { all in
                let window = UnsafeRawBufferPointer(rebasing: all[consumed..<available])
                switch parser.parse(window) {
                case .incomplete:
                    return (0, Optional<End>.none, Optional<Request>.none)
                case .refused(let problem):
                    return (0, End.refused(problem.status.code, problem.slug), nil)
                case .request(let parsed):
                    let view = HTTPRequestView(message: window, parsed: parsed)
                    let request = Request(
                        method: view.method.rawValue, target: view.target, body: view.withBody { Array($0) },
                        keepAlive: parsed.keepAlive)
                    return (parsed.messageLength, nil, request)
                }
            }
            if let end = result.1 {
                stream.end = end
                return stream
            }
            if let request = result.2 {
                stream.requests.append(request)
                consumed += result.0
                if consumed == bytes.count {
                    stream.end = .clean
                    return stream
                }
                continue
            }
            // Incomplete: feed more, or stop at the end of the bytes.
            if available == bytes.count {
                stream.end = .incomplete
                return stream
            }
            available = min(bytes.count, available + (step ?? bytes.count))
        }
    }
}

private func wire(_ text: String) -> [UInt8] {
    Array(text.utf8)
}

@Suite struct HTTPRequestParserTests {
    typealias Row = (name: String, bytes: [UInt8], expected: ParsedStream.End, requests: Int)

    static let accepted: [(String, String, [String], [String])] = [
        // name, wire, methods + targets, bodies
        ("get", "GET /tap/k HTTP/1.1\r\nHost: h\r\n\r\n", ["GET /tap/k"], [""]),
        ("post with a body", "POST /pay HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", ["POST /pay"], ["hello"]),
        ("content length with leading zeros", "POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 005\r\n\r\nhello", ["POST /e"], ["hello"]),
        ("content length with OWS", "POST /e HTTP/1.1\r\nHost: h\r\nContent-Length:   5 \r\n\r\nhello", ["POST /e"], ["hello"]),
        ("chunked", "POST /e HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", ["POST /e"], ["hello world"]),
        ("chunked upper case", "POST /e HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", ["POST /e"], ["0123456789"]),
        ("chunk extensions and trailers", "POST /e HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b;c=\"d e\";f\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n", ["POST /e"], ["abc"]),
        ("head with a body", "HEAD /x HTTP/1.1\r\nHost: h\r\nContent-Length: 31\r\n\r\nPOST /pay HTTP/1.1\r\nHost: h\r\n\r\n", ["HEAD /x"], ["POST /pay HTTP/1.1\r\nHost: h\r\n\r\n"]),
        ("get with a body", "GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", ["GET /x"], ["abc"]),
        ("pipeline", "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nzGET /c HTTP/1.1\r\nHost: h\r\n\r\n", ["GET /a", "POST /b", "GET /c"], ["", "z", ""]),
        ("http 1.0 without host", "GET / HTTP/1.0\r\n\r\n", ["GET /"], [""]),
        ("absolute form", "GET http://h/tap/k?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", ["GET http://h/tap/k?x=1"], [""]),
        ("asterisk form", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", ["OPTIONS *"], [""]),
        ("obs-text in a value", "GET / HTTP/1.1\r\nHost: h\r\nX: caf\u{E9}\r\n\r\n", ["GET /"], [""]),
        ("host with a port", "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", ["GET /"], [""]),
        ("ipv6 host", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", ["GET /"], [""]),
        ("expect continue", "POST /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", ["POST /e"], ["x"]),
    ]

    static let refused: [(String, String, Int, String)] = [
        ("bare lf", "GET / HTTP/1.1\nHost: h\n\n", 400, "bare-lf"),
        ("bare lf in a field", "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", 400, "bare-lf"),
        ("bare cr", "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400, "bare-cr"),
        ("leading empty line", "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "leading-empty-line"),
        ("two spaces", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request-line"),
        ("tab separator", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-request-line"),
        ("lower case version", "GET / http/1.1\r\nHost: h\r\n\r\n", 400, "bad-request-line"),
        ("http 1.2", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505, "unsupported-version"),
        ("unknown method", "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", 501, "unknown-method"),
        ("connect", "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 400, "bad-target"),
        ("connect with a path", "CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", 501, "connect-not-supported"),
        ("fragment in target", "GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-target"),
        ("nul in target", "GET /a\u{0}b HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-target"),
        ("bad percent", "GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-target"),
        ("asterisk on get", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad-target"),
        ("missing host", "GET / HTTP/1.1\r\n\r\n", 400, "missing-host"),
        ("two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "duplicate-host"),
        ("empty host", "GET / HTTP/1.1\r\nHost: \r\n\r\n", 400, "bad-host"),
        ("host with a path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "bad-host"),
        ("space before colon", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length : 3\r\n\r\nabc", 400, "space-before-colon"),
        ("obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400, "obs-fold"),
        ("nul in a value", "POST /pay HTTP/1.1\r\nHost: h\r\nIdempotency-Key: \"order\u{0}-A\"\r\n\r\n", 400, "bad-field-value"),
        ("del in a value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\u{7F}\r\n\r\n", 400, "bad-field-value"),
        ("vertical tab in a value", "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \u{0B}chunked\r\n\r\n", 400, "bad-field-value"),
        ("empty field name", "GET / HTTP/1.1\r\nHost: h\r\n: x\r\n\r\n", 400, "bad-field-name"),
        ("negative zero length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -0\r\n\r\n", 400, "bad-content-length"),
        ("plus length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\nhello", 400, "bad-content-length"),
        ("list length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\nhello", 400, "bad-content-length"),
        ("tab around a length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\t5\r\n\r\nhello", 400, "bad-content-length"),
        ("twenty-digit length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 00000000000000000005\r\n\r\nhello", 400, "bad-content-length"),
        ("tab after chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n", 400, "bad-transfer-encoding"),
        ("length in a trailer", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n", 400, "bad-trailer"),
        ("two equal lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400, "duplicate-content-length"),
        ("length and chunked", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "content-length-and-transfer-encoding"),
        ("identity", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n", 400, "bad-transfer-encoding"),
        ("chunked twice", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400, "bad-transfer-encoding"),
        ("chunked not last", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400, "bad-transfer-encoding"),
        ("gzip then chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "unsupported-transfer-encoding"),
        ("space before colon of te", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400, "space-before-colon"),
        ("te on http 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "transfer-encoding-http10"),
        ("chunk size 0x", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400, "bad-chunk-extension"),
        ("chunk size with a space", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n", 400, "bad-chunk-extension"),
        ("negative chunk size", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", 400, "bad-chunk-size"),
        ("long chunk size", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n000000000005\r\nhello\r\n0\r\n\r\n", 400, "bad-chunk-size"),
        ("chunk data too long", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", 400, "bad-chunk"),
        ("bare lf in chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400, "bare-lf"),
        ("expect other", "POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", 417, "unsupported-expectation"),
    ]

    @Test(arguments: accepted) func acceptedRequests(row: (String, String, [String], [String])) {
        let stream = ParsedStream.parse(wire(row.1))
        #expect(stream.end == .clean, "\(row.0): \(stream)")
        #expect(stream.requests.map { "\($0.method) \($0.target)" } == row.2, "\(row.0)")
        #expect(stream.requests.map { String(decoding: $0.body, as: UTF8.self) } == row.3, "\(row.0)")
    }

    @Test(arguments: refused) func refusedRequests(row: (String, String, Int, String)) {
        let stream = ParsedStream.parse(wire(row.1))
        #expect(stream.requests.isEmpty, "\(row.0): \(stream)")
        #expect(stream.end == .refused(row.2, row.3), "\(row.0): \(stream)")
    }

    @Test func sizeLimits() {
        let limits = HTTPRequestParser.Limits(maximumHeadBytes: 256, maximumBodyBytes: 10)
        let head = "GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 300) + "\r\n\r\n"
        #expect(ParsedStream.parse(wire(head), limits: limits).end == .refused(431, "header-fields-too-large"))
        // A head of exactly the limit (through its blank line) is accepted; one byte more is not.
        let base = "GET / HTTP/1.1\r\nHost: h\r\nX: \r\n\r\n"
        let exact = "GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 256 - base.utf8.count) + "\r\n\r\n"
        #expect(exact.utf8.count == 256)
        #expect(ParsedStream.parse(wire(exact), limits: limits).end == .clean)
        let over = "GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 257 - base.utf8.count) + "\r\n\r\n"
        #expect(ParsedStream.parse(wire(over), limits: limits).end == .refused(431, "header-fields-too-large"))
        // 413 as soon as the head announces too much, before any body byte.
        #expect(ParsedStream.parse(wire("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n"), limits: limits).end == .refused(413, "body-too-large"))
        #expect(ParsedStream.parse(wire("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9999999999999999999\r\n\r\n"), limits: limits).end == .refused(413, "body-too-large"))
        // Chunk sizes that add up to too much are refused as they arrive.
        #expect(ParsedStream.parse(wire("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n"), limits: limits).end == .refused(413, "body-too-large"))
        // A head past the limit with no LF at all is refused once its bytes show it.
        #expect(ParsedStream.parse(Array(repeating: UInt8(ascii: "a"), count: 300), limits: limits).end == .refused(431, "header-fields-too-large"))
        #expect(ParsedStream.parse(wire("GET /" + String(repeating: "a", count: 300)), limits: limits).end == .refused(431, "header-fields-too-large"))
    }

    @Test func aConnectionCloseRequestSaysSo() {
        let stream = ParsedStream.parse(wire("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"))
        #expect(stream.requests.map(\.keepAlive) == [false, false, true])
    }

    @Test func aRequestReadsItsFields() {
        let bytes = wire("POST /tap/k%20x?q=1 HTTP/1.1\r\nHost: example\r\nIdempotency-Key:  \"a\" \r\nX-Two: 1\r\nx-two: 2\r\nContent-Length: 2\r\n\r\nhi")
        bytes.withUnsafeBytes { buffer in
            var parser = HTTPRequestParser()
            guard case .request(let parsed) = parser.parse(buffer) else {
                Issue.record("not parsed")
                return
            }
            let view = HTTPRequestView(message: buffer, parsed: parsed)
            #expect(view.path == "/tap/k%20x")
            #expect(view.query == "q=1")
            #expect(view.headerValue(HTTPField.Name("Idempotency-Key")!) == "\"a\"")
            #expect(view.headerCount(HTTPField.Name("X-Two")!) == 2)
            #expect(view.request.authority == "example")
            #expect(view.request.path == "/tap/k%20x?q=1")
            #expect(view.headerFields.count == 5)
            #expect(view.withBody { Array($0) } == Array("hi".utf8))
        }
    }

    /// Fed a byte at a time, or in any chunks, the parser sees what it sees fed all at once.
    @Test func chunkingChangesNothing() async {
        let messages = Self.accepted.map { wire($0.1) } + Self.refused.map { wire($0.1) }
        await propertyCheck(input: Gen.int(in: 0..<messages.count), Gen.int(in: 1...40)) { index, step in
            let bytes = messages[index]
            let whole = ParsedStream.parse(bytes)
            let stepped = ParsedStream.parse(bytes, step: step)
            #expect(stepped == whole, "message \(index), step \(step)")
        }
    }
}
