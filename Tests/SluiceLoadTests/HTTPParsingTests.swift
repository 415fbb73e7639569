import Foundation
import SluiceLoadCore
import Testing

/// A response copied out of the parser's callback, for comparisons.
struct ParsedResponse: Equatable {
    var status: Int
    var minorVersion: Int
    var reason: String
    var body: [UInt8]
    var closes: Bool
    var contentType: String?
    var replayed: String?

    init(_ view: HTTPResponseView) {
        status = view.status
        minorVersion = view.minorVersion
        reason = String(decoding: view.reason, as: UTF8.self)
        body = Array(view.body)
        closes = view.closesConnection
        contentType = view.fieldText("content-type")
        replayed = view.fieldText("Idempotent-Replayed")
    }
}

/// Feeds `chunks` to `parser` one after another, as reads from a socket: the bytes it did not
/// consume stay buffered in front of the next chunk. Returns the responses and the bytes left.
func parse(
    _ chunks: [[UInt8]], with parser: HTTPResponseParser = HTTPResponseParser()
) throws -> (responses: [ParsedResponse], left: Int) {
    var buffered: [UInt8] = []
    var responses: [ParsedResponse] = []
    for chunk in chunks {
        buffered.append(contentsOf: chunk)
        let consumed = try buffered.withUnsafeBytes { bytes in
            try parser.consume(bytes) { response in
                responses.append(ParsedResponse(response))
                return true
            }
        }
        buffered.removeFirst(consumed)
    }
    return (responses, buffered.count)
}

/// The bytes of `text`.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite("HTTP response parser")
struct HTTPResponseParserTests {
    static let created = bytes(
        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nidempotent-replayed: true\r\nContent-Length: 30\r\n\r\n{\"charge\":\"c17\",\"amount\":1999}")
    static let noContent = bytes("HTTP/1.1 204 No Content\r\nDate: today\r\n\r\n")
    static let echoed = bytes("HTTP/1.1 200 OK\r\nCONTENT-LENGTH: 5\r\nContent-Type: application/octet-stream\r\n\r\na\r\nb\n")

    @Test("status, reason, header fields by any case, body")
    func oneResponse() throws {
        let (responses, left) = try parse([Self.created])
        #expect(left == 0)
        let response = try #require(responses.first)
        #expect(response.status == 201)
        #expect(response.minorVersion == 1)
        #expect(response.reason == "Created")
        #expect(response.contentType == "application/json")
        #expect(response.replayed == "true")
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"charge":"c17","amount":1999}"#)
        #expect(!response.closes)
    }

    @Test("a response split at every byte boundary, and fed byte by byte, parses the same")
    func splitReads() throws {
        let whole = Self.created + Self.echoed + Self.noContent
        let expected = try parse([whole]).responses
        #expect(expected.count == 3)
        for cut in 1..<whole.count {
            let (responses, left) = try parse([Array(whole[..<cut]), Array(whole[cut...])])
            #expect(responses == expected, "cut at \(cut)")
            #expect(left == 0)
        }
        let (responses, left) = try parse(whole.map { [$0] })
        #expect(responses == expected)
        #expect(left == 0)
    }

    @Test("several responses in one read: bodies with CR and LF, no body for 204, a 1xx skipped")
    func severalInOneRead() throws {
        let interim = bytes("HTTP/1.1 100 Continue\r\n\r\n")
        let (responses, left) = try parse([Self.echoed + interim + Self.noContent + Self.created])
        #expect(responses.map(\.status) == [200, 204, 201])
        #expect(responses[0].body == bytes("a\r\nb\n"))
        #expect(responses[1].body.isEmpty)
        #expect(left == 0)
    }

    @Test("a partial response after whole ones is left for the next read")
    func partialTail() throws {
        let (responses, left) = try parse([Self.noContent + Array(Self.created.dropLast(3))])
        #expect(responses.map(\.status) == [204])
        #expect(left == Self.created.count - 3)
        // A head complete but its body not: still waiting.
        let headOnly = bytes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
        #expect(try parse([headOnly]).responses.isEmpty)
    }

    @Test("bare LF line ends; a status line without a reason phrase")
    func bareLineFeeds() throws {
        let (responses, _) = try parse([bytes("HTTP/1.1 200\nContent-Length: 2\n\nhi"), bytes("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n")])
        #expect(responses.map(\.status) == [200, 404])
        #expect(responses[0].reason == "")
        #expect(responses[0].body == bytes("hi"))
    }

    @Test(
        "Connection: close, in any case and in a list; HTTP/1.0 closes unless keep-alive",
        arguments: [
            ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true),
            ("HTTP/1.1 200 OK\r\nconnection: Keep-Alive, CLOSE\r\nContent-Length: 0\r\n\r\n", true),
            ("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", true),
            ("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false),
        ])
    func connectionClose(text: String, closes: Bool) throws {
        let response = try #require(try parse([bytes(text)]).responses.first)
        #expect(response.closes == closes)
    }

    @Test(
        "bad status lines are refused",
        arguments: [
            "HTTP/2 200 OK", "HTTP/1.2 200 OK", "HTTP/1.1 20 OK", "HTTP/1.1 2000 OK", "HTTP/1.1 099 Low",
            "HTTP/1.1 600 High", "http/1.1 200 OK", "HTTP/1.1  200 OK", "HTTP/1.1 200OK", "HTTP/1.1 2x0 OK",
            "ICY 200 OK", "- ERR malformed", "1 OK hello", "", "HTTP/1.1 200 O\u{1}K", "HTTP/1.1\t200 OK",
        ])
    func badStatusLines(line: String) {
        let text = line + "\r\nContent-Length: 0\r\n\r\n"
        #expect {
            try parse([bytes(text)])
        } throws: { error in
            guard case .badStatusLine = error as? HTTPResponseError else { return false }
            return true
        }
    }

    @Test("a first line that cannot become a status line fails before its LF arrives")
    func earlyFailure() throws {
        #expect(throws: HTTPResponseError.self) { try parse([bytes("- ERR line-too")]) }
        #expect(throws: HTTPResponseError.self) { try parse([bytes("HTTP/2")]) }
        // A prefix of "HTTP/1." may still become one.
        #expect(try parse([bytes("HTT")]).left == 3)
        #expect(try parse([bytes("HTTP/1.1 200 O")]).left == 14)
    }

    @Test(
        "bad header lines are refused",
        arguments: [
            "NoColon", " Folded: continuation", "\tFolded: x", "Bad Name: x", "Name : x", ": no name",
            "X-Control: a\u{1}b", "X-CR: a\rb", "Na(me: x",
        ])
    func badHeaderLines(line: String) {
        let text = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + line + "\r\n\r\n"
        #expect {
            try parse([bytes(text)])
        } throws: { error in
            guard case .badHeaderLine = error as? HTTPResponseError else { return false }
            return true
        }
    }

    @Test("an oversized head is refused as soon as the limit is reached, not only when it ends")
    func oversizedHead() throws {
        let parser = HTTPResponseParser(maximumHeadBytes: 64, maximumBodyBytes: 1024)
        // A head of exactly 64 bytes passes.
        let padding = String(repeating: "x", count: 64 - "HTTP/1.1 204 X\r\nX-Pad: \r\n\r\n".utf8.count)
        let fits = bytes("HTTP/1.1 204 X\r\nX-Pad: \(padding)\r\n\r\n")
        #expect(fits.count == 64)
        #expect(try parse([fits], with: parser).responses.count == 1)
        // One byte more fails.
        let over = bytes("HTTP/1.1 204 X\r\nX-Pad: \(padding)x\r\n\r\n")
        #expect(throws: HTTPResponseError.headTooLarge(limit: 64)) { try parse([over], with: parser) }
        // Header lines that never end: fails once 64 bytes are buffered, fed in small reads.
        let endless = bytes("HTTP/1.1 200 OK\r\n" + String(repeating: "X-A: b\r\n", count: 10))
        #expect(throws: HTTPResponseError.headTooLarge(limit: 64)) {
            try parse(stride(from: 0, to: endless.count, by: 5).map { Array(endless[$0..<min($0 + 5, endless.count)]) }, with: parser)
        }
        // A status line longer than the limit, with no LF yet.
        #expect(throws: HTTPResponseError.headTooLarge(limit: 64)) {
            try parse([bytes("HTTP/1.1 200 " + String(repeating: "r", count: 60))], with: parser)
        }
    }

    @Test("a Content-Length above the limit fails with the head, before the body arrives")
    func oversizedBody() throws {
        let parser = HTTPResponseParser(maximumHeadBytes: 1024, maximumBodyBytes: 100)
        #expect(throws: HTTPResponseError.bodyTooLarge(length: 101, limit: 100)) {
            try parse([bytes("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n")], with: parser)
        }
        #expect(try parse([bytes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n") + Array(repeating: 0x41, count: 100)], with: parser).responses.count == 1)
        #expect(parser.maximumBufferedBytes == 1124)
    }

    @Test(
        "bad or conflicting Content-Length values are refused",
        arguments: ["abc", "-1", "+5", "1 2", "", "0x10", "1234567890123456789", "5, 5"])
    func badContentLength(value: String) {
        #expect {
            try parse([bytes("HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n")])
        } throws: { error in
            guard case .badContentLength = error as? HTTPResponseError else { return false }
            return true
        }
    }

    @Test("two Content-Length fields must agree")
    func duplicateContentLength() throws {
        #expect(try parse([bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nok")]).responses.count == 1)
        #expect(throws: HTTPResponseError.badContentLength("2 and 3")) {
            try parse([bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok")])
        }
    }

    @Test("framing the client does not accept: chunked, close-delimited, 101")
    func unsupportedFraming() throws {
        #expect(throws: HTTPResponseError.unsupportedTransferEncoding("chunked")) {
            try parse([bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")])
        }
        #expect(throws: HTTPResponseError.missingContentLength(status: 200)) {
            try parse([bytes("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")])
        }
        #expect(throws: HTTPResponseError.unexpectedUpgrade) {
            try parse([bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n")])
        }
        // 304 carries no body whatever its Content-Length says.
        let (responses, left) = try parse([bytes("HTTP/1.1 304 Not Modified\r\nContent-Length: 42\r\n\r\n")])
        #expect(responses.first?.body == [])
        #expect(left == 0)
    }

    @Test("the callback can stop the parse; the rest stays unconsumed")
    func stopEarly() throws {
        let input = HTTPResponseParserTests.noContent + HTTPResponseParserTests.created
        let parser = HTTPResponseParser()
        var seen = 0
        let consumed = try input.withUnsafeBytes { bytes in
            try parser.consume(bytes) { _ in
                seen += 1
                return false
            }
        }
        #expect(seen == 1)
        #expect(consumed == HTTPResponseParserTests.noContent.count)
    }
}

@Suite("HTTP request encoder")
struct HTTPRequestEncoderTests {
    static func encoded(_ request: HTTPRequest, _ encoder: HTTPRequestEncoder = HTTPRequestEncoder(
        host: "127.0.0.1", port: 8080, keyPrefix: "k", idemPrefix: "n0nce-", echoBody: bytes("abcdef"))
    ) -> String {
        var encoder = encoder
        encoder.encode(request)
        return String(decoding: encoder.bytes, as: UTF8.self)
    }

    @Test("every route, byte for byte")
    func routes() {
        #expect(Self.encoded(.echo) == "POST /echo HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/octet-stream\r\nContent-Length: 6\r\n\r\nabcdef")
        #expect(Self.encoded(.tap(key: 42)) == "POST /tap/k42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 0\r\n\r\n")
        #expect(
            Self.encoded(.pay(key: 7, pair: 12, amount: 1999))
                == "POST /pay HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nIdempotency-Key: \"n0nce-12\"\r\nContent-Type: application/json\r\nContent-Length: 26\r\n\r\n{\"key\":\"k7\",\"amount\":1999}")
        #expect(
            Self.encoded(.search(key: 3, tag: 9))
                == "GET /search/k3?q=q9%20%26%3D%2B%25%2F HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
        #expect(Self.encoded(.limit(key: 5, cost: nil)) == "POST /limit/k5 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 0\r\n\r\n")
        #expect(Self.encoded(.limit(key: 5, cost: 3)) == "POST /limit/k5?cost=3 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 0\r\n\r\n")
        #expect(Self.encoded(.page(key: 1, page: 250)) == "GET /page/k1/250 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
        #expect(Self.encoded(.metrics) == "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
    }

    @Test("the PAY body's Content-Length counts its bytes")
    func payLength() throws {
        for pair: UInt64 in [0, 9, 10, 123_456_789] {
            let text = Self.encoded(.pay(key: pair, pair: pair, amount: pair + 1))
            let parts = text.components(separatedBy: "\r\n\r\n")
            #expect(parts.count == 2)
            #expect(text.contains("Content-Length: \(parts[1].utf8.count)\r\n"))
        }
    }

    @Test("keys are percent-encoded in paths and escaped in JSON; the idempotency key is a structured-field string")
    func escaping() {
        let encoder = HTTPRequestEncoder(host: "::1", port: 9, keyPrefix: "a b/é\"", idemPrefix: "x\"y\\z-")
        #expect(Self.encoded(.tap(key: 1), encoder) == "POST /tap/a%20b%2F%C3%A9%221 HTTP/1.1\r\nHost: [::1]:9\r\nContent-Length: 0\r\n\r\n")
        let pay = Self.encoded(.pay(key: 1, pair: 2, amount: 3), encoder)
        #expect(pay.hasPrefix("POST /pay HTTP/1.1\r\nHost: [::1]:9\r\nIdempotency-Key: \"x\\\"y\\\\z-2\"\r\n"))
        #expect(pay.hasSuffix("\r\n\r\n{\"key\":\"a b/é\\\"1\",\"amount\":3}"))
        #expect(encoder.keyName(5) == bytes("a b/é\"5"))
        #expect(encoder.idempotencyKey(pair: 5) == bytes("x\"y\\z-5"))
    }

    @Test("the search query holds bytes a query must encode, and its tag")
    func searchQuery() {
        #expect(HTTPRequestEncoder.searchQuery(tag: 17) == bytes("q17 &=+%/"))
    }

    @Test("encoding again replaces the previous request")
    func reuse() {
        var encoder = HTTPRequestEncoder(host: "127.0.0.1", port: 1)
        encoder.encode(.pay(key: 1, pair: 1, amount: 1))
        encoder.encode(.metrics)
        #expect(String(decoding: encoder.bytes, as: UTF8.self) == "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
    }
}

@Suite("JSON members")
struct JSONMembersTests {
    static func value(_ name: String, _ text: String) -> JSONMembers.Value? {
        bytes(text).withUnsafeBytes { JSONMembers.value(name, in: $0) }
    }

    @Test("strings, numbers and literals at the top level; nested values skipped")
    func members() {
        let body = #" { "nested": {"charge": "no", "list": [1, "}", {"a": []}]}, "tap" : 12 , "ok": true, "charge":"c\"1" } "#
        #expect(Self.value("charge", body) == .string("c\"1"))
        #expect(Self.value("tap", body) == .number("12"))
        #expect(Self.value("ok", body) == .literal("true"))
        #expect(Self.value("nested", body) == .composite)
        #expect(Self.value("missing", body) == nil)
        #expect(bytes(body).withUnsafeBytes { JSONMembers.integer("tap", in: $0) } == 12)
        #expect(bytes(body).withUnsafeBytes { JSONMembers.string("tap", in: $0) } == nil)
    }

    @Test("escapes, \\u and surrogate pairs are decoded")
    func escapes() {
        #expect(Self.value("s", #"{"s": "a\/b\\c\n\t\u00e9\ud83d\ude00"}"#) == .string("a/b\\c\n\té😀"))
        #expect(Self.value("s", #"{"s": "q1 &=+%/"}"#) == .string("q1 &=+%/"))
    }

    @Test(
        "malformed bodies give nil",
        arguments: [
            "", "[]", #"{"s" "x"}"#, #"{"s": "x"#, #"{"a": 1 "s": "x"}"#, #"{"s": "\x"}"#, #"{"s": "\ud83d"}"#,
            "{\"s\": \"a\u{1}b\"}", #"{"a": 01, "s": "x"}"#, #"{"a": [1, "s": "x"}"#, "{\"s\": tru}",
        ])
    func malformed(text: String) {
        #expect(Self.value("s", text) == nil)
    }
}

@Suite("Prometheus text")
struct PrometheusTextTests {
    @Test("labelled and unlabelled samples, summed per name; comments, timestamps and odd labels")
    func totals() {
        let text = """
            # HELP sluice_payments_total Processor charges.
            # TYPE sluice_payments_total counter
            sluice_payments_total{plugin="pay",loop="0"} 40
            sluice_payments_total{plugin="pay",loop="1"} 2 1700000000000

            sluice_declines_total 3
            sluice_taps_total{note="a } b, \\"c\\" d"} 1e3
            sluice_latency_seconds_bucket{le="+Inf"} 7
            sluice_weird_total NaN
            sluice_infinite_total +Inf
              sluice_indented_total 5
            not a sample line
            9bad_name 1
            """
        let totals = PrometheusText.totals(text)
        #expect(totals["sluice_payments_total"] == 42)
        #expect(totals["sluice_declines_total"] == 3)
        #expect(totals["sluice_taps_total"] == 1000)
        #expect(totals["sluice_latency_seconds_bucket"] == 7)
        #expect(totals["sluice_weird_total"] == nil)
        #expect(totals["sluice_infinite_total"] == nil)
        #expect(totals["sluice_indented_total"] == 5)
        #expect(totals["not"] == nil)
        #expect(totals.count == 5)

        let stats = ServerStats(metrics: text)
        #expect(stats.payments == 42)
        #expect(stats.declines == 3)
        #expect(stats.fields["taps"] == 1000)
        #expect(stats.fields["latency_seconds_bucket"] == nil)
    }

    @Test("a page without the counters: the fields are absent")
    func absent() {
        let stats = ServerStats(metrics: "# nothing yet\nprocess_open_fds 12\n")
        #expect(stats.payments == nil)
        #expect(stats.declines == nil)
    }
}

@Suite("HTTP reply judgement")
struct HTTPReplyJudgementTests {
    static func judge(_ text: String, _ expectation: HTTPReplyJudgement.Expectation) throws -> HTTPReplyJudgement {
        var judgement: HTTPReplyJudgement?
        let input = bytes(text)
        _ = try input.withUnsafeBytes { raw in
            try HTTPResponseParser().consume(raw) { response in
                judgement = HTTPReplyJudgement.judge(response, expecting: expectation)
                return false
            }
        }
        return try #require(judgement)
    }

    /// A response with a JSON body and the right Content-Length.
    static func response(_ status: String, _ body: String, fields: String = "") -> String {
        "HTTP/1.1 \(status)\r\n\(fields)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    static func problem(_ status: String, _ slug: String, fields: String = "") -> String {
        let code = status.prefix(3)
        return response(status, #"{"type":"urn:sluice:problem:\#(slug)","title":"t","status":\#(code),"detail":"d"}"#, fields: fields)
    }

    @Test("legitimate answers and refusals of each route")
    func accepted() throws {
        let cases: [(String, HTTPReplyJudgement.Expectation, ReplyKind)] = [
            (Self.response("200 OK", "hello"), .echo(body: bytes("hello")), .ok),
            (Self.problem("429 Too Many Requests", "limited"), .echo(body: bytes("hello")), .limited),
            (Self.response("200 OK", #"{"tap": 3}"#), .tap, .ok),
            (Self.problem("429 Too Many Requests", "throttled"), .tap, .throttled),
            (Self.response("201 Created", #"{"charge": "c1", "amount": 5}"#), .pay(amount: 5), .ok),
            (Self.response("201 Created", #"{"charge": "c1", "amount": 5}"#, fields: "Idempotent-Replayed: true\r\n"), .pay(amount: 5), .okReplayed),
            (Self.problem("402 Payment Required", "payment-declined"), .pay(amount: 5), .declined),
            (Self.problem("402 Payment Required", "payment-declined", fields: "idempotent-replayed: TRUE\r\n"), .pay(amount: 5), .declinedReplayed),
            (Self.problem("409 Conflict", "conflict"), .pay(amount: 5), .conflict),
            (Self.response("200 OK", #"{"results": "q1 &=+%\/"}"#), .search(query: bytes("q1 &=+%/")), .ok),
            (Self.problem("409 Conflict", "superseded"), .search(query: bytes("q")), .superseded),
            (Self.problem("409 Conflict", "cancelled"), .search(query: bytes("q")), .cancelled),
        ]
        for (text, expectation, kind) in cases {
            let judgement = try Self.judge(text, expectation)
            #expect(judgement.kind == kind, "\(text)")
            #expect(judgement.verdict == .accepted, "\(text)")
        }
        #expect(try Self.judge(Self.response("201 Created", #"{"charge": "c9", "amount": 5}"#), .pay(amount: 5)).charge == "c9")
    }

    @Test("503 busy is counted apart; other 503s and 4xx/5xx are errors")
    func errors() throws {
        let busy = try Self.judge(Self.problem("503 Service Unavailable", "busy", fields: "Retry-After: 1\r\n"), .tap)
        #expect(busy.kind == .busy)
        #expect(busy.verdict == .busy)
        for text in [
            Self.problem("503 Service Unavailable", "shutting-down"), Self.problem("500 Internal Server Error", "internal"),
            Self.problem("400 Bad Request", "bad-key"), Self.problem("404 Not Found", "not-found"),
            Self.problem("422 Unprocessable Content", "mismatch"),
        ] {
            let judgement = try Self.judge(text, .pay(amount: 5))
            #expect(judgement.verdict == .errorStatus, "\(text)")
        }
        // A limit of the server's payment chain refused it: a refusal the contract names.
        let limited = try Self.judge(Self.problem("429 Too Many Requests", "limited"), .pay(amount: 5))
        #expect(limited.kind == .limited && limited.verdict == .accepted)
    }

    @Test("statuses a route never answers, and refusals without their problem type, are unexpected")
    func unexpected() throws {
        let cases: [(String, HTTPReplyJudgement.Expectation)] = [
            (Self.response("200 OK", "{}"), .pay(amount: 5)),
            (Self.response("201 Created", "x"), .echo(body: bytes("x"))),
            (Self.response("302 Found", ""), .tap),
            (Self.problem("409 Conflict", "superseded"), .pay(amount: 5)),
            (Self.problem("429 Too Many Requests", "limited"), .tap),
            (Self.response("409 Conflict", "{}"), .search(query: bytes("q"))),
        ]
        for (text, expectation) in cases {
            let judgement = try Self.judge(text, expectation)
            guard case .unexpected = judgement.verdict else {
                Issue.record("\(text): \(judgement.verdict)")
                continue
            }
        }
    }

    @Test("content that contradicts the request")
    func mismatched() throws {
        let cases: [(String, HTTPReplyJudgement.Expectation)] = [
            (Self.response("200 OK", "hellO"), .echo(body: bytes("hello"))),
            (Self.response("200 OK", #"{"taps": 3}"#), .tap),
            (Self.response("201 Created", #"{"amount": 5}"#), .pay(amount: 5)),
            (Self.response("201 Created", #"{"charge": "c1", "amount": 6}"#), .pay(amount: 5)),
            (Self.response("200 OK", #"{"results": "q2"}"#), .search(query: bytes("q1"))),
        ]
        for (text, expectation) in cases {
            let judgement = try Self.judge(text, expectation)
            guard case .mismatched = judgement.verdict else {
                Issue.record("\(text): \(judgement.verdict)")
                continue
            }
        }
    }
}
