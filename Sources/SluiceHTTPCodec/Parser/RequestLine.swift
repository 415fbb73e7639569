import HTTPTypes

/// A request line as ``HTTPRequestParser`` read it: `method SP request-target SP HTTP-version`.
struct RequestLine: Sendable, Hashable {
    /// The method (one of the registered ones).
    var method: HTTPRequest.Method
    /// Where the target lies in the message.
    var target: Range<Int>
    /// The version.
    var version: HTTPParsedRequest.Version

    /// The registered methods this server reads (RFC 9110 §9 and `PATCH`, RFC 5789), by their
    /// bytes. Another token is a method this server does not implement (501).
    private static let methods: [(name: StaticString, method: HTTPRequest.Method)] = [
        ("GET", .get), ("POST", .post), ("HEAD", .head), ("PUT", .put), ("DELETE", .delete),
        ("OPTIONS", .options), ("PATCH", .patch), ("TRACE", .trace), ("CONNECT", .connect),
    ]

    /// Parses a request line (without its CRLF), strictly.
    static func parse(_ line: UnsafeRawBufferPointer) -> Result<RequestLine, HTTPProblem> {
        func bad(_ detail: String) -> Result<RequestLine, HTTPProblem> {
            .failure(HTTPProblem(.badRequest, "bad-request-line", detail: detail))
        }
        // method SP
        var index = 0
        while index < line.count, HTTPBytes.isToken(line[index]) { index += 1 }
        guard index > 0, index < line.count, line[index] == HTTPBytes.space else {
            return bad("the request line is not `method SP target SP version` with single spaces and a token for the method")
        }
        let methodBytes = UnsafeRawBufferPointer(rebasing: line[0..<index])
        guard let method = methods.first(where: { bytesEqual(methodBytes, $0.name) })?.method else {
            return .failure(
                HTTPProblem(.notImplemented, "unknown-method", detail: "this server does not implement the method \(String(decoding: methodBytes, as: UTF8.self))"))
        }
        // target SP
        let targetStart = index + 1
        index = targetStart
        while index < line.count, line[index] != HTTPBytes.space { index += 1 }
        let targetEnd = index
        guard targetEnd > targetStart, index < line.count else {
            return bad("the request line has no target, or no version after it")
        }
        // version, the rest of the line
        let version = UnsafeRawBufferPointer(rebasing: line[(index + 1)...])
        let parsedVersion: HTTPParsedRequest.Version
        if bytesEqual(version, "HTTP/1.1") {
            parsedVersion = .http11
        } else if bytesEqual(version, "HTTP/1.0") {
            parsedVersion = .http10
        } else if version.count == 8, bytesEqual(UnsafeRawBufferPointer(rebasing: version[0..<5]), "HTTP/"),
            isDigit(version[5]), version[6] == UInt8(ascii: "."), isDigit(version[7])
        {
            return .failure(
                HTTPProblem(
                    HTTPResponse.Status(code: 505, reasonPhrase: "HTTP Version Not Supported"), "unsupported-version",
                    detail: "this server reads HTTP/1.1 and HTTP/1.0"))
        } else {
            return bad("the request line does not end with HTTP/1.1 or HTTP/1.0 after a single space")
        }
        let target = UnsafeRawBufferPointer(rebasing: line[targetStart..<targetEnd])
        if let problem = checkTarget(target, method: method) { return .failure(problem) }
        return .success(RequestLine(method: method, target: targetStart..<targetEnd, version: parsedVersion))
    }

    /// Checks a request target's form and characters (RFC 9112 §3.2, RFC 3986).
    private static func checkTarget(_ target: UnsafeRawBufferPointer, method: HTTPRequest.Method) -> HTTPProblem? {
        func bad(_ detail: String) -> HTTPProblem {
            HTTPProblem(.badRequest, "bad-target", detail: detail)
        }
        if target.count == 1, target[0] == UInt8(ascii: "*") {
            return method == .options ? nil : bad("only OPTIONS takes the asterisk form (*)")
        }
        var pathStart = 0
        if target[0] != UInt8(ascii: "/") {
            // absolute-form: http(s)://authority[path][?query]
            let scheme: Int
            if target.count > 7, HTTPBytes.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: target[0..<7]), "http://") {
                scheme = 7
            } else if target.count > 8, HTTPBytes.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: target[0..<8]), "https://") {
                scheme = 8
            } else {
                return bad("the target is neither a path (origin form) nor an http or https URI (absolute form)")
            }
            var end = scheme
            while end < target.count, target[end] != UInt8(ascii: "/"), target[end] != UInt8(ascii: "?") {
                guard HTTPBytes.isHost(target[end]) else { return bad("the target's authority holds a byte it may not") }
                end += 1
            }
            guard end > scheme else { return bad("the target's authority is empty") }
            pathStart = end
        }
        var index = pathStart
        while index < target.count {
            let byte = target[index]
            guard HTTPBytes.isTarget(byte) else {
                return bad("the target holds a byte it may not (0x\(String(byte, radix: 16)))")
            }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < target.count, HTTPBytes.isHex(target[index + 1]), HTTPBytes.isHex(target[index + 2]) else {
                    return bad("a % in the target is not followed by two hex digits")
                }
                index += 3
                continue
            }
            index += 1
        }
        return nil
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}

/// Whether `bytes` are exactly `text`'s bytes (case-sensitive).
package func bytesEqual(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
    guard bytes.count == text.utf8CodeUnitCount else { return false }
    guard let base = bytes.baseAddress else { return text.utf8CodeUnitCount == 0 }
    return memcmp(base, text.utf8Start, bytes.count) == 0
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
