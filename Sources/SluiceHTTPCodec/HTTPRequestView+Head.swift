import HTTPTypes

extension HTTPRequestView {
    /// Reads a request that another HTTP server has already framed (a swift-http-types head and
    /// its whole body, as a framework hands them over) exactly as Sluice's own server reads one,
    /// and calls `read` with the view, so that one ``HTTPCodec`` serves every HTTP front alike.
    ///
    /// The head and body are written out as the HTTP/1.1 message they stand for (the body framed
    /// by its length; the framework's own framing fields dropped, its decoding done) and put
    /// through ``HTTPRequestParser`` with `limits`: a field the strict parser refuses (a control
    /// byte in a value, a malformed `Host`, a body over the limit, …) is refused here too.
    ///
    /// - Parameters:
    ///   - request: the head; its `authority` becomes the `Host` field (a request without one
    ///     is read as HTTP/1.0, which needs none).
    ///   - body: the body, whole.
    ///   - limits: the parser's bounds.
    ///   - read: what to do with the view; it is valid only during the call.
    /// - Throws: the parser's ``HTTPProblem`` for a request it refuses, or what `read` throws.
    public static func reading<Body: Collection<UInt8>, Result>(
        _ request: HTTPRequest,
        body: Body,
        limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits(),
        _ read: (HTTPRequestView) throws(HTTPProblem) -> Result
    ) throws(HTTPProblem) -> Result {
        guard body.count <= limits.maximumBodyBytes else {
            throw HTTPProblem(.contentTooLarge, "body-too-large", detail: "the request body is over \(limits.maximumBodyBytes) bytes")
        }
        // The head's own values go into the message's lines as they are: one that holds a
        // space or a control byte could end its line early and write another.
        let isLineSafe: (UInt8) -> Bool = { $0 > 0x20 && $0 != 0x7F }
        guard (request.path ?? "/").utf8.allSatisfy(isLineSafe), (request.authority ?? "").utf8.allSatisfy(isLineSafe) else {
            throw HTTPProblem(.badRequest, "bad-target", detail: "the request target or authority holds a space or a control byte")
        }
        let message = Self.message(for: request, body: body)
        var parser = HTTPRequestParser(limits: limits)
        let step = message.withUnsafeBytes { parser.parse($0) }
        switch step {
        case .request(let parsed):
            // `withUnsafeBytes` rethrows untyped errors: the problem comes out as a result.
            return try message.withUnsafeBytes { bytes in
                Swift.Result { () throws(HTTPProblem) in try read(HTTPRequestView(message: bytes, parsed: parsed)) }
            }.get()
        case .refused(let problem):
            throw problem
        case .incomplete:
            // A written-out message is whole; the parser waits only when a field hides framing.
            throw HTTPProblem(.badRequest, "bad-request", detail: "the request cannot be read as one HTTP/1.1 message")
        }
    }

    /// `request` and `body` as the bytes of one HTTP/1.1 (or HTTP/1.0, without an authority)
    /// message framed by `Content-Length`.
    static func message<Body: Collection<UInt8>>(for request: HTTPRequest, body: Body) -> [UInt8] {
        var message: [UInt8] = []
        message.reserveCapacity(256 + body.count)
        message.append(contentsOf: request.method.rawValue.utf8)
        message.append(UInt8(ascii: " "))
        message.append(contentsOf: (request.path ?? "/").utf8)
        message.append(contentsOf: (request.authority == nil ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n").utf8)
        if let authority = request.authority {
            Self.appendField("Host", authority, to: &message)
        }
        for field in request.headerFields {
            switch field.name {
            case .contentLength, .transferEncoding, .connection:
                // The framework framed and decoded the body; it is framed again below.
                continue
            default:
                if field.name.canonicalName == "host" { continue }
                Self.appendField(field.name.rawName, field.value, to: &message)
            }
        }
        Self.appendField("Content-Length", String(body.count), to: &message)
        message.append(contentsOf: "\r\n".utf8)
        message.append(contentsOf: body)
        return message
    }

    private static func appendField(_ name: String, _ value: String, to message: inout [UInt8]) {
        message.append(contentsOf: name.utf8)
        message.append(contentsOf: ": ".utf8)
        message.append(contentsOf: value.utf8)
        message.append(contentsOf: "\r\n".utf8)
    }
}
