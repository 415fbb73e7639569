import HTTPTypes
import SluiceHTTPCodec
import Testing

/// A request another server framed, read as Sluice's own server reads one.
@Suite struct HTTPRequestViewReadingTests {
    private func head(_ method: HTTPRequest.Method = .post, authority: String? = "example.com", path: String, fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "http", authority: authority, path: path, headerFields: fields)
    }

    /// A framework's target text gives the path the parser's view reads from the same target:
    /// the one a route is matched against, on every front.
    @Test(arguments: ["/pay", "/pay?x=1", "/tap/k?", "/", "*", "http://h/pay?x=1", "http://h", "http://h?x=1", "http://h/", "https://h:8/a/b"])
    func aTargetsPathIsTheViewsPath(_ target: String) throws {
        let viewPath = try HTTPRequestView.reading(head(target == "*" ? .options : .get, path: target), body: []) { view in view.path }
        #expect(HTTPRequestView.path(ofTarget: target) == viewPath[...])
    }

    @Test func theViewHoldsTheHeadAndTheBody() throws {
        var fields = HTTPFields()
        fields[.contentType] = "text/plain"
        fields[HTTPField.Name("X-Note")!] = "one"
        fields.append(HTTPField(name: HTTPField.Name("X-Note")!, value: "two"))
        let seen = try HTTPRequestView.reading(head(path: "/quota/alice?cost=2", fields: fields), body: Array("hello".utf8)) { view in
            (view.method, view.path, view.query, view.headerValue(.contentType), view.headerCount(HTTPField.Name("X-Note")!),
             view.headerValue(HTTPField.Name("Host")!), view.parsed.version, view.withBody { String(decoding: $0, as: UTF8.self) })
        }
        #expect(seen.0 == .post)
        #expect(seen.1 == "/quota/alice")
        #expect(seen.2 == "cost=2")
        #expect(seen.3 == "text/plain")
        #expect(seen.4 == 2)
        #expect(seen.5 == "example.com")
        #expect(seen.6 == .http11)
        #expect(seen.7 == "hello")
    }

    /// The framework framed and decoded the body: its framing fields are dropped and the body is
    /// framed again by its length, so a stale `Content-Length` or a `Transfer-Encoding` cannot
    /// make the parser read another body.
    @Test func theFrameworksFramingIsReplaced() throws {
        var fields = HTTPFields()
        fields[.contentLength] = "999"
        fields[.transferEncoding] = "chunked"
        fields[.connection] = "keep-alive"
        let body = try HTTPRequestView.reading(head(path: "/x", fields: fields), body: Array("abc".utf8)) { view in
            (view.bodyCount, view.headerCount(.contentLength), view.headerCount(.transferEncoding), view.headerValue(.contentLength))
        }
        #expect(body.0 == 3)
        #expect(body.1 == 1)
        #expect(body.2 == 0)
        #expect(body.3 == "3")
    }

    @Test func aHeadWithoutAnAuthorityIsReadAsHTTP10() throws {
        let version = try HTTPRequestView.reading(head(.get, authority: nil, path: "/x"), body: [UInt8]()) { $0.parsed.version }
        #expect(version == .http10)
    }

    @Test func whatTheStrictParserRefusesIsRefused() {
        let limits = HTTPRequestParser.Limits(maximumHeadBytes: 256, maximumBodyBytes: 4)
        #expect(throws: HTTPProblem.self) {
            try HTTPRequestView.reading(head(path: "/x"), body: Array("12345".utf8), limits: limits) { _ in () }
        }
        var big = HTTPFields()
        big[HTTPField.Name("X-Big")!] = String(repeating: "b", count: 300)
        do {
            try HTTPRequestView.reading(head(path: "/x", fields: big), body: [UInt8](), limits: limits) { _ in () }
            Issue.record("a head over the limit was read")
        } catch {
            #expect(error.status == .requestHeaderFieldsTooLarge)
        }
        // A target or authority that would write a line of its own.
        do {
            try HTTPRequestView.reading(head(path: "/x HTTP/1.1\r\nHost: a\r\n\r\nGET /y"), body: [UInt8]()) { _ in () }
            Issue.record("a target with a line break was read")
        } catch {
            #expect(error.slug == "bad-target")
        }
        #expect(throws: HTTPProblem.self) {
            try HTTPRequestView.reading(head(authority: "a\r\nX-Smuggled: 1", path: "/x"), body: [UInt8]()) { _ in () }
        }
        // A Host that is not a host name (a framework's authority is not checked for us).
        #expect(throws: HTTPProblem.self) {
            try HTTPRequestView.reading(head(authority: "a b", path: "/x"), body: [UInt8]()) { _ in () }
        }
    }

    /// What the closure throws comes out as it is.
    @Test func theReadersProblemIsThrown() {
        do {
            try HTTPRequestView.reading(head(path: "/x"), body: [UInt8]()) { _ throws(HTTPProblem) in
                throw HTTPProblem(.badRequest, "bad-thing", detail: "the reader refused it")
            }
            Issue.record("no problem thrown")
        } catch {
            #expect(error.slug == "bad-thing")
        }
    }
}
