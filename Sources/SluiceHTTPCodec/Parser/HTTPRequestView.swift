import HTTPTypes

/// A request read by Sluice's HTTP server, as a codec sees it: method, target, header fields and
/// body, read in place from the connection's buffer.
///
/// It is valid only during the call that hands it over (a codec's `decode`): copy what must
/// outlive it. Nothing is copied until asked for: ``headerValue(_:)`` finds a field in the head's
/// bytes; ``request`` and ``headerFields`` build swift-http-types values (and allocate).
public struct HTTPRequestView {
    /// The message's bytes: the head, then the body as it came (chunked framing included).
    private let message: UnsafeRawBufferPointer
    /// Where the request lies in `message`.
    public let parsed: HTTPParsedRequest
    /// A chunked body's data, once decoded.
    private let decodedBody: [UInt8]?

    /// A view of `parsed`, a request in `message` (the bytes the parser was fed, from the
    /// request's first byte). A chunked body is decoded here (the one copy a request can cost).
    public init(message: UnsafeRawBufferPointer, parsed: HTTPParsedRequest) {
        self.message = message
        self.parsed = parsed
        if case .chunked(let range, let dataCount) = parsed.body {
            decodedBody = Self.decodeChunked(UnsafeRawBufferPointer(rebasing: message[range]), dataCount: dataCount)
        } else {
            decodedBody = nil
        }
    }

    /// The method.
    public var method: HTTPRequest.Method { parsed.method }

    /// The request target's bytes, as sent.
    public var targetBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: message[parsed.target]) }

    /// The request target, as sent (`/tap/user42?x=1`).
    public var target: String { String(decoding: targetBytes, as: UTF8.self) }

    /// The path's bytes (before any `?`), not decoded; for an absolute-form target
    /// (`http://host/tap/k`), its path (`/` when it has none); `*` for the asterisk form.
    public var pathBytes: UnsafeRawBufferPointer {
        let target = targetBytes
        guard let bounds = Self.pathBounds(in: target) else { return Self.rootPath }
        return UnsafeRawBufferPointer(rebasing: target[bounds])
    }

    /// Where the path of `target` (a request target's bytes) lies in it, as ``pathBytes`` reads
    /// it; `nil` for an absolute-form target without a path (its path is then `/`).
    static func pathBounds(in target: UnsafeRawBufferPointer) -> Range<Int>? {
        var start = 0
        if target.first != UInt8(ascii: "/") && target.count > 1 {
            // absolute-form: skip `scheme://authority`.
            guard let schemeEnd = Self.index(of: UInt8(ascii: "/"), in: target, from: 0) else { return 0..<target.count }
            let authorityStart = schemeEnd + 2
            start = Self.index(of: UInt8(ascii: "/"), in: target, from: authorityStart) ?? target.count
            let query = Self.index(of: UInt8(ascii: "?"), in: target, from: authorityStart) ?? target.count
            if query < start { start = query }
            if start == target.count || target[start] == UInt8(ascii: "?") { return nil }
        }
        let end = Self.index(of: UInt8(ascii: "?"), in: target, from: start) ?? target.count
        return start..<end
    }

    /// The path of a request target given as text (a framework's head), read as ``pathBytes``
    /// reads a parsed request's: what a route is matched against on every front.
    package static func path(ofTarget target: String) -> Substring {
        var target = target
        let bounds = target.withUTF8 { pathBounds(in: UnsafeRawBufferPointer($0)) }
        guard let bounds else { return "/" }
        let utf8 = target.utf8
        return target[utf8.index(utf8.startIndex, offsetBy: bounds.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: bounds.upperBound)]
    }

    /// The path (``pathBytes`` as a string).
    public var path: String { String(decoding: pathBytes, as: UTF8.self) }

    /// The query (after the first `?`), not decoded; `nil` without one.
    public var query: String? {
        let target = targetBytes
        guard let mark = Self.index(of: UInt8(ascii: "?"), in: target, from: 0) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: target[(mark + 1)...]), as: UTF8.self)
    }

    /// The value of the first header field named `name`, if any (with the whitespace around it
    /// removed).
    public func headerValue(_ name: HTTPField.Name) -> String? {
        var found: String?
        forEachField { fieldName, value in
            guard found == nil, Self.matches(fieldName, name) else { return }
            found = String(decoding: value, as: UTF8.self)
        }
        return found
    }

    /// How many field lines named `name` the head holds.
    public func headerCount(_ name: HTTPField.Name) -> Int {
        var count = 0
        forEachField { fieldName, _ in
            if Self.matches(fieldName, name) { count += 1 }
        }
        return count
    }

    /// Every header field, in the order received (allocates).
    public var headerFields: HTTPFields {
        var fields = HTTPFields()
        forEachField { name, value in
            // The parser accepted the name as a token, which is what HTTPField.Name accepts.
            if let fieldName = HTTPField.Name(String(decoding: name, as: UTF8.self)) {
                fields.append(HTTPField(name: fieldName, value: String(decoding: value, as: UTF8.self)))
            }
        }
        return fields
    }

    /// The request as a swift-http-types value (allocates): method, `http` scheme, the `Host`
    /// as authority, the target as path, and the header fields.
    public var request: HTTPRequest {
        var host: String?
        forEachField { name, value in
            if host == nil, HTTPBytes.equalsIgnoringCase(name, "host") { host = String(decoding: value, as: UTF8.self) }
        }
        return HTTPRequest(method: method, scheme: "http", authority: host, path: target, headerFields: headerFields)
    }

    /// The body's length in bytes (decoded, for a chunked body).
    public var bodyCount: Int { parsed.bodyCount }

    /// Calls `body` with the body's bytes, valid during the call.
    public func withBody<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch parsed.body {
        case .empty:
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        case .range(let range):
            return try body(UnsafeRawBufferPointer(rebasing: message[range]))
        case .chunked:
            return try (decodedBody ?? []).withUnsafeBytes(body)
        }
    }

    // MARK: - Reading the head

    /// Calls `visit` with each field line's name and value (OWS removed), in order.
    private func forEachField(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) {
        let head = UnsafeRawBufferPointer(rebasing: message[0..<parsed.headLength])
        // Skip the request line; every line ends with CRLF (the parser checked it).
        guard var start = Self.index(of: HTTPBytes.lf, in: head, from: 0).map({ $0 + 1 }) else { return }
        while start < head.count, let lf = Self.index(of: HTTPBytes.lf, in: head, from: start) {
            let line = UnsafeRawBufferPointer(rebasing: head[start..<(lf - 1)])
            start = lf + 1
            guard !line.isEmpty, let colon = Self.index(of: HTTPBytes.colon, in: line, from: 0) else { continue }
            var valueStart = colon + 1
            var valueEnd = line.count
            while valueStart < valueEnd, line[valueStart] == HTTPBytes.space || line[valueStart] == HTTPBytes.tab { valueStart += 1 }
            while valueEnd > valueStart, line[valueEnd - 1] == HTTPBytes.space || line[valueEnd - 1] == HTTPBytes.tab { valueEnd -= 1 }
            visit(UnsafeRawBufferPointer(rebasing: line[0..<colon]), UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd]))
        }
    }

    private static func matches(_ bytes: UnsafeRawBufferPointer, _ name: HTTPField.Name) -> Bool {
        var canonical = name.canonicalName
        return canonical.withUTF8 { HTTPBytes.equalsIgnoringCase(bytes, UnsafeRawBufferPointer($0)) }
    }

    private static func index(of byte: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress, let found = memchr(base + start, Int32(byte), bytes.count - start) else {
            return nil
        }
        return UnsafeRawPointer(found) - base
    }

    /// `/`, the path of an absolute-form target that has none.
    private static var rootPath: UnsafeRawBufferPointer {
        let root: StaticString = "/"
        return UnsafeRawBufferPointer(start: root.utf8Start, count: root.utf8CodeUnitCount)
    }

    /// The data of a chunked body the parser accepted (its framing is known to be valid).
    static func decodeChunked(_ framed: UnsafeRawBufferPointer, dataCount: Int) -> [UInt8] {
        var data: [UInt8] = []
        data.reserveCapacity(dataCount)
        var position = 0
        while position < framed.count, let lf = index(of: HTTPBytes.lf, in: framed, from: position) {
            var size = 0
            var digit = position
            while digit < lf, HTTPBytes.isHex(framed[digit]) {
                size = size * 16 + HTTPBytes.hexValue(framed[digit])
                digit += 1
            }
            if size == 0 { break }
            let dataStart = lf + 1
            data.append(contentsOf: UnsafeRawBufferPointer(rebasing: framed[dataStart..<(dataStart + size)]))
            position = dataStart + size + 2
        }
        return data
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
