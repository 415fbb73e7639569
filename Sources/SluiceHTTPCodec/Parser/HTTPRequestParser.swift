import HTTPTypes

/// A strict, incremental HTTP/1.1 request parser over bytes it does not copy.
///
/// Feed it the bytes buffered for a connection, starting at the first byte of a request; it
/// answers that more are needed, that a whole request (head and body) lies at the front, or
/// that the bytes are refused. Fed the same bytes again with more behind them, it goes on where
/// it stopped (it remembers how far it validated), so a head or body that trickles in is not
/// scanned again from its start. After a whole request, the caller consumes
/// ``HTTPParsedRequest/messageLength`` bytes and feeds the rest, starting at the next request.
///
/// It reads RFC 9112 and RFC 9110 as strictly as they allow and refuses what another parser
/// might read differently (a request smuggled in what this one took for a body is the attack):
///
/// - lines end with CRLF only; a bare LF or CR is refused, and so are empty lines before the
///   request line;
/// - the request line is `method SP request-target SP HTTP-version` with single spaces; the
///   method is one of the registered methods (another token: 501); the target is origin-form,
///   absolute-form (`http` or `https`) or `*` for `OPTIONS`, of RFC 3986's characters only;
///   `CONNECT` is not served (501); the version is `HTTP/1.1` or `HTTP/1.0` (another: 505);
/// - a field line is `token ":" OWS value OWS`: no whitespace before the colon, no line folding
///   (obs-fold), no NUL, CR, LF or other control in a value;
/// - `Host` is required once (HTTP/1.1) and well formed;
/// - the body is framed by exactly one `Content-Length` of digits only, or by
///   `Transfer-Encoding` with `chunked` as its one coding (a coding before it: 501; `chunked`
///   not last, or twice: 400), never both, and never `Transfer-Encoding` on HTTP/1.0; a body
///   on any method is read as that request's body;
/// - chunk sizes are hex digits only, each size line (with its extensions, `;name[=value]`
///   without whitespace) at most ``Limits/maximumChunkLineBytes``, and the trailer section is
///   read as fields (never `Content-Length` or `Transfer-Encoding`) and dropped; a framing
///   field's value holds no tab, and a length at most 19 digits;
/// - the head (through the blank line that ends it) is at most ``Limits/maximumHeadBytes``
///   (else 431), the body at most ``Limits/maximumBodyBytes`` (else 413, as soon as the head or
///   the chunk sizes announce more), and a chunked body's framing adds at most
///   ``Limits/maximumChunkFramingBytes``.
///
/// A refusal is an ``HTTPProblem`` whose status and slug say why (`bare-lf`, `obs-fold`,
/// `content-length-and-transfer-encoding`, …); a server answers it and closes the connection.
public struct HTTPRequestParser: Sendable {
    /// The parser's bounds.
    public struct Limits: Sendable, Hashable {
        /// The most bytes of a head, from the request line through the blank line that ends it.
        public var maximumHeadBytes: Int
        /// The largest body (after a chunked body's decoding).
        public var maximumBodyBytes: Int
        /// The longest chunk-size line, extensions and CRLF included.
        public var maximumChunkLineBytes: Int
        /// The most bytes a chunked body's framing (size lines, CRLFs, trailers) may add to its
        /// data.
        public var maximumChunkFramingBytes: Int

        /// Limits with the defaults of `sluice-echo`.
        public init(
            maximumHeadBytes: Int = 16 << 10, maximumBodyBytes: Int = 1 << 20, maximumChunkLineBytes: Int = 1024,
            maximumChunkFramingBytes: Int = 64 << 10
        ) {
            self.maximumHeadBytes = maximumHeadBytes
            self.maximumBodyBytes = maximumBodyBytes
            self.maximumChunkLineBytes = maximumChunkLineBytes
            self.maximumChunkFramingBytes = maximumChunkFramingBytes
        }

        /// The most bytes one request can take on the wire: its head, its body, and a chunked
        /// body's framing with the one line (a trailer, at most a head's size) that may cross the
        /// framing bound before it is checked.
        public var maximumMessageBytes: Int {
            2 * maximumHeadBytes + maximumBodyBytes + maximumChunkFramingBytes
        }
    }

    /// What the bytes at the front hold.
    public enum Step: Sendable {
        /// A request is incomplete: feed more bytes.
        case incomplete
        /// A whole request.
        case request(HTTPParsedRequest)
        /// The bytes are refused; answer the problem and close the connection.
        case refused(HTTPProblem)
    }

    /// The bounds.
    public let limits: Limits
    private var state = State()

    /// A parser with `limits`.
    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// What has been learnt of the request at the front so far.
    private struct State {
        /// Where the next line to validate starts (head, or a chunked body's framing).
        var position = 0
        var requestLine: RequestLine?
        var fields = FieldFacts()
        /// The head's length, once its blank line has arrived.
        var headLength: Int?
        /// A chunked body's data bytes so far.
        var chunkedData = 0
        /// A chunked body's trailer section has begun (after the last chunk).
        var inTrailers = false
    }

    /// Whether a request has begun: some of its bytes were fed and it is not complete.
    public var hasPartialRequest: Bool { state.position > 0 || state.headLength != nil }

    /// Whether the head of the request at the front is complete (its body may still be
    /// arriving).
    public var headIsComplete: Bool { state.headLength != nil }

    /// Whether the request whose head is complete asked for `100 Continue` before its body.
    public var expectsContinue: Bool { state.headLength != nil && state.fields.expectsContinue }

    /// Forgets the request at the front (after a refusal, or to start over).
    public mutating func reset() {
        state = State()
    }

    /// Parses the request at the front of `bytes` (which start where the previous request
    /// ended), going on from where the previous call on the same request stopped.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) -> Step {
        if state.headLength == nil {
            switch parseHead(bytes) {
            case .incomplete: return .incomplete
            case .refused(let problem):
                reset()
                return .refused(problem)
            case .complete: break
            }
        }
        guard let headLength = state.headLength, let requestLine = state.requestLine else { return .incomplete }
        let step: Step
        switch state.fields.framing {
        case .none:
            step = .request(message(requestLine, headLength: headLength, length: headLength, body: .empty))
        case .contentLength(let length):
            guard bytes.count - headLength >= length else { return .incomplete }
            step = .request(
                message(requestLine, headLength: headLength, length: headLength + length, body: .range(headLength..<headLength + length)))
        case .chunked:
            step = parseChunked(bytes, requestLine: requestLine, headLength: headLength)
        }
        switch step {
        case .incomplete: break
        case .request, .refused: reset()
        }
        return step
    }

    private func message(_ line: RequestLine, headLength: Int, length: Int, body: HTTPParsedRequest.Body) -> HTTPParsedRequest {
        HTTPParsedRequest(
            method: line.method, target: line.target, version: line.version, headLength: headLength, messageLength: length,
            body: body, keepAlive: state.fields.keepAlive(version: line.version), hasUpgrade: state.fields.hasUpgrade,
            expectsContinue: state.fields.expectsContinue)
    }

    // MARK: - Head

    private enum HeadStep {
        case incomplete
        case complete
        case refused(HTTPProblem)
    }

    private mutating func parseHead(_ bytes: UnsafeRawBufferPointer) -> HeadStep {
        // Only the head's bytes are looked at: a head may not be longer than the limit.
        let limit = min(bytes.count, limits.maximumHeadBytes)
        guard let base = bytes.baseAddress else { return .incomplete }
        while true {
            let start = state.position
            guard start < limit, let found = memchr(base + start, Int32(HTTPBytes.lf), limit - start) else {
                // A CR followed by anything but LF is refused at once, before the line ends
                // (and before the head's limit, which is past it).
                if start < limit, let problem = Self.bareCR(in: UnsafeRawBufferPointer(rebasing: bytes[start..<limit]), lineEnded: false) {
                    return .refused(problem)
                }
                if bytes.count >= limits.maximumHeadBytes {
                    return .refused(Self.headTooLarge(limits.maximumHeadBytes))
                }
                return .incomplete
            }
            let lf = UnsafeRawPointer(found) - base
            // The first bad byte decides, wherever the stream was cut: a CR before it that is
            // not the one right before the LF, else an LF without its CR.
            if let problem = Self.bareCR(in: UnsafeRawBufferPointer(rebasing: bytes[start..<lf]), lineEnded: false) {
                return .refused(problem)
            }
            guard lf > start, bytes[lf - 1] == HTTPBytes.cr else {
                return .refused(HTTPProblem(.badRequest, "bare-lf", detail: "a line of the head ends with a bare LF, not CRLF"))
            }
            let line = UnsafeRawBufferPointer(rebasing: bytes[start..<(lf - 1)])
            state.position = lf + 1
            if state.requestLine == nil {
                if line.isEmpty {
                    return .refused(HTTPProblem(.badRequest, "leading-empty-line", detail: "an empty line came before the request line"))
                }
                switch RequestLine.parse(line) {
                case .success(let requestLine): state.requestLine = requestLine
                case .failure(let problem): return .refused(problem)
                }
                continue
            }
            if line.isEmpty {
                state.headLength = lf + 1
                state.position = lf + 1
                return finishHead()
            }
            if let problem = state.fields.add(line, maximumBodyBytes: limits.maximumBodyBytes) {
                return .refused(problem)
            }
        }
    }

    /// A CR that is not the one right before a line's LF. In a line that has ended (`line`
    /// without its CRLF) any CR is one; in a line still arriving, a CR followed by another byte.
    static func bareCR(in line: UnsafeRawBufferPointer, lineEnded: Bool) -> HTTPProblem? {
        guard let base = line.baseAddress, let found = memchr(base, Int32(HTTPBytes.cr), line.count) else { return nil }
        let index = UnsafeRawPointer(found) - base
        guard lineEnded || index + 1 < line.count else { return nil }
        return HTTPProblem(.badRequest, "bare-cr", detail: "a CR is not followed by LF")
    }

    /// The blank line arrived: checks what only the whole head shows.
    private mutating func finishHead() -> HeadStep {
        guard let requestLine = state.requestLine else { return .incomplete }
        if let problem = state.fields.check(version: requestLine.version, maximumBodyBytes: limits.maximumBodyBytes) {
            return .refused(problem)
        }
        if requestLine.method == .connect {
            return .refused(HTTPProblem(.notImplemented, "connect-not-supported", detail: "this server does not tunnel (CONNECT)"))
        }
        return .complete
    }

    static func headTooLarge(_ limit: Int) -> HTTPProblem {
        HTTPProblem(
            HTTPResponse.Status(code: 431, reasonPhrase: "Request Header Fields Too Large"), "header-fields-too-large",
            detail: "the request head is over \(limit) bytes")
    }

    static func bodyTooLarge(_ limit: Int) -> HTTPProblem {
        HTTPProblem(.contentTooLarge, "body-too-large", detail: "the request body is over \(limit) bytes")
    }

    // MARK: - Chunked body

    private mutating func parseChunked(_ bytes: UnsafeRawBufferPointer, requestLine: RequestLine, headLength: Int) -> Step {
        // Every check depends on where a byte lies, never on how many bytes have arrived, so
        // that a body refused whole is refused the same way however it trickles in.
        let dataLimit = limits.maximumBodyBytes
        while true {
            let start = state.position
            if start - headLength - state.chunkedData > limits.maximumChunkFramingBytes {
                return .refused(Self.bodyTooLarge(dataLimit))
            }
            let lineLimit = state.inTrailers ? limits.maximumHeadBytes : limits.maximumChunkLineBytes
            let searchEnd = min(bytes.count, start + lineLimit)
            guard let base = bytes.baseAddress, start < searchEnd,
                let found = memchr(base + start, Int32(HTTPBytes.lf), searchEnd - start)
            else {
                if start < searchEnd, let problem = Self.bareCR(in: UnsafeRawBufferPointer(rebasing: bytes[start..<searchEnd]), lineEnded: false) {
                    return .refused(problem)
                }
                if bytes.count - start >= lineLimit {
                    return .refused(
                        state.inTrailers
                            ? Self.headTooLarge(limits.maximumHeadBytes)
                            : HTTPProblem(.badRequest, "chunk-line-too-long", detail: "a chunk-size line is over \(lineLimit) bytes"))
                }
                return .incomplete
            }
            let lf = UnsafeRawPointer(found) - base
            if let problem = Self.bareCR(in: UnsafeRawBufferPointer(rebasing: bytes[start..<lf]), lineEnded: false) {
                return .refused(problem)
            }
            guard lf > start, bytes[lf - 1] == HTTPBytes.cr else {
                return .refused(HTTPProblem(.badRequest, "bare-lf", detail: "a line of the chunked body ends with a bare LF, not CRLF"))
            }
            let line = UnsafeRawBufferPointer(rebasing: bytes[start..<(lf - 1)])
            if state.inTrailers {
                state.position = lf + 1
                if line.isEmpty {
                    return .request(
                        message(requestLine, headLength: headLength, length: lf + 1, body: .chunked(headLength..<(lf + 1), dataCount: state.chunkedData)))
                }
                var trailer = FieldFacts()
                if let problem = trailer.add(line, maximumBodyBytes: dataLimit, trailer: true) {
                    return .refused(problem)
                }
                continue
            }
            let size: Int
            switch ChunkLine.size(of: line) {
            case .success(let value): size = value
            case .failure(let problem): return .refused(problem)
            }
            if size == 0 {
                state.inTrailers = true
                state.position = lf + 1
                continue
            }
            guard size <= dataLimit - state.chunkedData else { return .refused(Self.bodyTooLarge(dataLimit)) }
            let dataEnd = lf + 1 + size
            guard bytes.count >= dataEnd + 2 else { return .incomplete }
            guard bytes[dataEnd] == HTTPBytes.cr, bytes[dataEnd + 1] == HTTPBytes.lf else {
                return .refused(HTTPProblem(.badRequest, "bad-chunk", detail: "a chunk's data is not followed by CRLF"))
            }
            state.chunkedData += size
            state.position = dataEnd + 2
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
