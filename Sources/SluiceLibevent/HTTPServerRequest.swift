import CLibevent

/// One HTTP request as libevent's `evhttp` parsed it: method, target, header fields and body,
/// and the one way to answer it.
///
/// Read it and answer it on its connection's loop, once. A request whose connection closed
/// before the answer ignores the answer.
public final class HTTPServerRequest: @unchecked Sendable {
    // @unchecked Sendable: every member that changes (the evhttp request pointer) is touched on
    // the connection's loop only (`respond` and the readers check it); the reference itself is
    // carried across threads by completions that hop back to that loop before using it.

    /// The connection it arrived on.
    public let connection: HTTPConnection
    /// The method, upper case (`GET`, `POST`, …).
    public let method: String
    /// The request target as sent (`/tap/user42?x=1`).
    public let target: String
    private var request: OpaquePointer?

    init(connection: HTTPConnection, request: OpaquePointer) {
        self.connection = connection
        self.request = request
        self.method = Self.methodName(evhttp_request_get_command(request))
        self.target = evhttp_request_get_uri(request).map { String(cString: $0) } ?? "/"
    }

    /// The target's path (before any `?`), not decoded. An absolute-form target
    /// (`http://host/tap/k`, as sent to proxies) gives its path too.
    public var path: Substring {
        let origin = originForm
        return origin.utf8.firstIndex(of: UInt8(ascii: "?")).map { origin[..<$0] } ?? origin
    }

    /// The target's query (after the first `?`), not decoded; `nil` without one.
    public var query: Substring? {
        let origin = originForm
        return origin.utf8.firstIndex(of: UInt8(ascii: "?")).map { origin[origin.utf8.index(after: $0)...] }
    }

    /// The target in origin form: an absolute-form target without its scheme and authority.
    private var originForm: Substring {
        let utf8 = target.utf8
        let slash = UInt8(ascii: "/")
        // `scheme://authority/path`: the first slash starts `//`, the next one the path.
        guard utf8.first != slash, let first = utf8.firstIndex(of: slash), first > utf8.startIndex,
            utf8[utf8.index(before: first)] == UInt8(ascii: ":"),
            let second = utf8.index(first, offsetBy: 1, limitedBy: utf8.endIndex), second < utf8.endIndex,
            utf8[second] == slash
        else { return target[...] }
        let authority = target[utf8.index(after: second)...]
        return authority.utf8.firstIndex(of: slash).map { authority[$0...] } ?? "/"
    }

    /// Whether it has been answered (or can no longer be: its connection closed).
    public var isAnswered: Bool { request == nil }

    /// The value of the first header field named `name` (case-insensitive), if any.
    public func headerValue(_ name: String) -> String? {
        connection.loop.assertInEventLoop()
        guard let request, let value = evhttp_find_header(evhttp_request_get_input_headers(request), name) else {
            return nil
        }
        return String(cString: value)
    }

    /// Every header field, in the order received.
    public var headerFields: [(name: String, value: String)] {
        connection.loop.assertInEventLoop()
        guard let request, let headers = evhttp_request_get_input_headers(request) else { return [] }
        var fields: [(name: String, value: String)] = []
        var entry = headers.pointee.tqh_first
        while let current = entry {
            fields.append((String(cString: current.pointee.key), String(cString: current.pointee.value)))
            entry = current.pointee.next.tqe_next
        }
        return fields
    }

    /// The body's length in bytes.
    public var bodyCount: Int {
        guard let request, let buffer = evhttp_request_get_input_buffer(request) else { return 0 }
        return evbuffer_get_length(buffer)
    }

    /// Calls `body` with the request body's bytes (made contiguous), valid during the call.
    public func withBody<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        connection.loop.assertInEventLoop()
        guard let request, let buffer = evhttp_request_get_input_buffer(request) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        let count = evbuffer_get_length(buffer)
        guard count > 0, let bytes = evbuffer_pullup(buffer, -1) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// Answers with `status` and `reason`, the header fields `fields` (names and values as
    /// sent; libevent adds `Content-Length`, `Date` and the `Connection` handling) and `body`.
    /// With `closeConnection`, the connection closes once the answer is written. Does nothing
    /// when already answered or when the connection is gone.
    ///
    /// A field whose value holds a CR or an LF is dropped (libevent refuses it).
    public func respond(
        status: Int, reason: String, fields: [(name: String, value: String)], body: UnsafeRawBufferPointer,
        closeConnection: Bool = false
    ) {
        respond(status: status, reason: reason, body: body, closeConnection: closeConnection) { add in
            for field in fields { add(field.name, field.value) }
        }
    }

    /// `respond(status:reason:fields:body:closeConnection:)` with the header fields written
    /// by `writeFields`, which calls `add` once per field (no array in between).
    public func respond(
        status: Int, reason: String, body: UnsafeRawBufferPointer, closeConnection: Bool = false,
        fields writeFields: (_ add: (_ name: String, _ value: String) -> Void) -> Void
    ) {
        connection.loop.assertInEventLoop()
        guard let request else { return }
        self.request = nil
        let headers = evhttp_request_get_output_headers(request)
        // `withCString` reads a native string in place, or copies a small one to the stack; the
        // implicit `String` to pointer conversion allocates an array for a small string.
        writeFields { name, value in
            name.withCString { name in
                value.withCString { value in _ = evhttp_add_header(headers, name, value) }
            }
        }
        if closeConnection { _ = evhttp_add_header(headers, "Connection", "close") }
        // The answer to HEAD has no body: evhttp would write one, and a keep-alive client would
        // read it as the start of the next answer.
        if body.count > 0, evhttp_request_get_command(request) != EVHTTP_REQ_HEAD,
            let output = evhttp_request_get_output_buffer(request), let base = body.baseAddress
        {
            evbuffer_add(output, base, body.count)
        }
        reason.withCString { evhttp_send_reply(request, Int32(status), $0, nil) }
        connection.answered(self)
    }

    /// ``respond(status:reason:fields:body:closeConnection:)`` with the body's bytes.
    public func respond(
        status: Int, reason: String, fields: [(name: String, value: String)], body: [UInt8] = [],
        closeConnection: Bool = false
    ) {
        body.withUnsafeBytes {
            respond(status: status, reason: reason, fields: fields, body: $0, closeConnection: closeConnection)
        }
    }

    /// The connection is being freed by libevent: forget the request if libevent frees it with
    /// the connection. A request libevent detached from its connection (the peer went away while
    /// it was being handled) stays valid: answering it later frees it.
    func connectionClosing() {
        guard let request else { return }
        if evhttp_request_get_connection(request) != nil { self.request = nil }
    }

    private static func methodName(_ command: evhttp_cmd_type) -> String {
        switch command {
        case EVHTTP_REQ_GET: "GET"
        case EVHTTP_REQ_POST: "POST"
        case EVHTTP_REQ_HEAD: "HEAD"
        case EVHTTP_REQ_PUT: "PUT"
        case EVHTTP_REQ_DELETE: "DELETE"
        case EVHTTP_REQ_OPTIONS: "OPTIONS"
        case EVHTTP_REQ_TRACE: "TRACE"
        case EVHTTP_REQ_CONNECT: "CONNECT"
        case EVHTTP_REQ_PATCH: "PATCH"
        default: "UNKNOWN"
        }
    }
}
