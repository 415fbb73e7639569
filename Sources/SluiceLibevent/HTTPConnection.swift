import CLibevent
import SluiceCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What an ``HTTPServer`` calls for one connection, on its loop.
public protocol HTTPConnectionHandler: AnyObject {
    /// A complete request (head and body) arrived. Answer it with
    /// `HTTPServerRequest.respond(status:reason:…)`, now or later
    /// on the connection's loop; the connection reads its next request only once it is answered.
    func received(_ request: HTTPServerRequest)
    /// The connection closed (after this, answers to its requests are dropped).
    func connectionClosed()
}

/// One client connection of an ``HTTPServer``, on one loop.
///
/// libevent's `evhttp` parses the requests; this object watches the bytes as they arrive to
/// bound what `evhttp` alone does not: a head's size (431 as soon as it is too big) and how long
/// a head and a body may take from their first byte (408), and it counts the connection in the
/// shared connection cap.
public final class HTTPConnection: @unchecked Sendable {
    // @unchecked Sendable: created, used and closed on `loop`'s thread only (every entry point is
    // a libevent callback or a job on that loop); the reference is only carried across threads.

    /// Where the connection's bytes are in the request cycle.
    enum Phase {
        /// Between requests: the next byte starts a head.
        case idle
        /// Reading a head (``headScanner`` follows it).
        case head
        /// The head is complete; `evhttp` reads the body.
        case body
        /// The request was handed over and is not answered yet.
        case handling
        /// Refused (head too big, timed out, over the cap): closing.
        case refused
    }

    /// The loop it lives on.
    public let loop: EventLoop
    /// A process-unique id.
    public let id: UInt64
    /// The peer's address, `host:port`.
    public let remoteAddress: String
    let bufferevent: OpaquePointer
    private(set) var evhttpConnection: OpaquePointer?
    private weak var listener: HTTPListener?
    /// The server's caps and timeouts.
    private let configuration: HTTPConfiguration
    /// The configuration's head and body timeouts in nanoseconds, converted once (they are
    /// armed for every request).
    private let headTimeout: Int64
    private let bodyTimeout: Int64
    var handler: (any HTTPConnectionHandler)?
    private var phase = Phase.idle
    /// When the current head or body must be complete, if it is being read.
    private var deadlineAt: Instant?
    /// The one timer of the connection, armed at most once per timeout period: a new deadline
    /// later than the armed one leaves it; when it fires before the deadline it re-arms for the
    /// rest. A request so costs no timer operation of its own.
    private var deadlineTimer: LoopTimer?
    private var current: HTTPServerRequest?
    private var inputCallback: OpaquePointer?
    private var counted = false
    /// A pipelined head over the limit, seen while the request before it was answered: it is
    /// answered 431 when `evhttp` hands it over (its answer must follow the one before).
    private var pipelinedHeadTooLarge = false
    /// The head being scanned was already buffered when the request before it was answered.
    private var scanningPipelined = false
    /// Reads the head being received. Touched for every chunk of a head: it skips the runtime's
    /// dynamic exclusivity checks, as the connection lives on its loop's thread and no access
    /// to it overlaps another.
    @exclusivity(unchecked) private var headScanner: HTTPHeadScanner

    init(loop: EventLoop, id: UInt64, listener: HTTPListener, bufferevent: OpaquePointer, evhttpConnection: OpaquePointer) {
        self.loop = loop
        self.id = id
        self.listener = listener
        self.configuration = listener.configuration
        self.headTimeout = listener.configuration.headTimeout.nanosecondsClamped
        self.bodyTimeout = listener.configuration.bodyTimeout.nanosecondsClamped
        self.headScanner = HTTPHeadScanner(
            maximumHeadBytes: listener.configuration.maximumHeadBytes, maximumBodyBytes: listener.configuration.maximumBodyBytes)
        self.bufferevent = bufferevent
        self.evhttpConnection = evhttpConnection
        var address: UnsafeMutablePointer<CChar>?
        var port: UInt16 = 0
        evhttp_connection_get_peer(evhttpConnection, &address, &port)
        self.remoteAddress = "\(address.map { String(cString: $0) } ?? "?"):\(port)"
    }

    /// Whether the connection is still open.
    public var isOpen: Bool { evhttpConnection != nil }

    /// Starts watching: counts the connection in (`false` when the cap refuses it) and hooks
    /// the input buffer and the close callback.
    func start(accounting: ConnectionAccounting) -> Bool {
        guard let evhttpConnection else { return false }
        let context = Unmanaged.passUnretained(self).toOpaque()
        // Released in `closed()`, which libevent calls once as it frees the connection.
        evhttp_connection_set_closecb(evhttpConnection, httpConnectionClosedCallback, Unmanaged.passRetained(self).toOpaque())
        guard accounting.admitConnection() else { return false }
        counted = true
        inputCallback = evbuffer_add_cb(bufferevent_get_input(bufferevent), httpInputCallback, context)
        return true
    }

    // MARK: - Requests

    func received(_ request: OpaquePointer) {
        deadlineAt = nil
        phase = .handling
        let wrapped = HTTPServerRequest(connection: self, request: request)
        current = wrapped
        if pipelinedHeadTooLarge {
            pipelinedHeadTooLarge = false
            let limit = configuration.maximumHeadBytes
            respondProblem(wrapped, status: 431, reason: "Request Header Fields Too Large", slug: "header-fields-too-large",
                           detail: "the request head is larger than \(limit) bytes")
            return
        }
        if Self.hasConflictingLengths(request) {
            // Framed differently by different parsers (request smuggling): refuse, and close.
            respondProblem(wrapped, status: 400, reason: "Bad Request", slug: "bad-framing",
                           detail: "the request has more than one Content-Length")
            return
        }
        guard let handler else {
            wrapped.respond(status: 503, reason: "Service Unavailable", fields: [], closeConnection: true)
            return
        }
        handler.received(wrapped)
    }

    func answered(_ request: HTTPServerRequest) {
        guard current === request else { return }
        current = nil
        if case .handling = phase {
            phase = .idle
            watchInput(true)
            // Bytes already read belong to the next request (pipelined): its head's clock and
            // size count from now.
            if let input = bufferevent_get_input(bufferevent) {
                let buffered = evbuffer_get_length(input)
                if buffered > 0 { inputChanged(input, added: buffered, pipelined: true) }
            }
        }
    }

    /// Whether the request has more than one `Content-Length` field (or one holding a list).
    private static func hasConflictingLengths(_ request: OpaquePointer) -> Bool {
        guard let headers = evhttp_request_get_input_headers(request) else { return false }
        var count = 0
        var entry = headers.pointee.tqh_first
        while let current = entry {
            if strcasecmp(current.pointee.key, "Content-Length") == 0 {
                count += 1
                if count > 1 || strchr(current.pointee.value, Int32(UInt8(ascii: ","))) != nil { return true }
            }
            entry = current.pointee.next.tqe_next
        }
        return false
    }

    /// Answers `request` with a problem and closes the connection after it.
    private func respondProblem(_ request: HTTPServerRequest, status: Int, reason: String, slug: String, detail: String) {
        let body = Array(Self.problemBody(status: status, reason: reason, slug: slug, detail: detail).utf8)
        request.respond(
            status: status, reason: reason, fields: [("Content-Type", "application/problem+json")], body: body,
            closeConnection: true)
    }

    static func problemBody(status: Int, reason: String, slug: String, detail: String) -> String {
        #"{"type":"urn:sluice:problem:\#(slug)","title":"\#(reason)","status":\#(status),"detail":"\#(detail)"}"#
    }

    /// Turns the input watch on (between requests and while a head arrives) or off (while
    /// `evhttp` reads a body and while a request is handled: its many drains need no look).
    private func watchInput(_ on: Bool) {
        guard let inputCallback else { return }
        let input = bufferevent_get_input(bufferevent)
        if on {
            evbuffer_cb_set_flags(input, inputCallback, UInt32(EVBUFFER_CB_ENABLED))
        } else {
            evbuffer_cb_clear_flags(input, inputCallback, UInt32(EVBUFFER_CB_ENABLED))
        }
    }

    // MARK: - Watching the input

    fileprivate func inputChanged(_ buffer: OpaquePointer, added: Int, pipelined: Bool = false) {
        guard added > 0 else { return }
        switch phase {
        case .idle:
            phase = .head
            scanningPipelined = pipelined
            headScanner.reset()
            arm(after: headTimeout)
            scanHead(buffer, added: added)
        case .head:
            scanHead(buffer, added: added)
        case .body, .handling, .refused:
            break
        }
    }

    /// Scans the `added` bytes at the end of `buffer` for the blank line that ends a head,
    /// counting the head's bytes.
    private func scanHead(_ buffer: OpaquePointer, added: Int) {
        guard case .head = phase else { return }
        let limit = configuration.maximumHeadBytes
        let total = evbuffer_get_length(buffer)
        var start = evbuffer_ptr()
        guard evbuffer_ptr_set(buffer, &start, total - added, EVBUFFER_PTR_SET) == 0 else { return }
        // The new bytes, a few chunks at a time, without allocating.
        var remaining = added
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 8) { vectors in
            while remaining > 0, headScanner.verdict == .incomplete {
                let filled = min(Int(evbuffer_peek(buffer, remaining, &start, vectors.baseAddress, 8)), 8)
                guard filled > 0 else { return }
                for vector in vectors.prefix(filled) {
                    guard let base = vector.iov_base else { continue }
                    let chunk = UnsafeRawBufferPointer(start: base, count: min(vector.iov_len, remaining))
                    remaining -= chunk.count
                    if headScanner.scan(chunk) != .incomplete { break }
                }
                if remaining > 0, headScanner.verdict == .incomplete {
                    // More chunks than one peek returns: move past what was scanned.
                    guard evbuffer_ptr_set(buffer, &start, total - remaining, EVBUFFER_PTR_SET) == 0 else { return }
                }
            }
        }
        let verdict = headScanner.verdict
        if verdict == .tooLarge, scanningPipelined {
            // The answer before it may not be written yet: refuse it in turn.
            pipelinedHeadTooLarge = true
            phase = .body
            watchInput(false)
        } else if verdict == .tooLarge {
            refuse(status: 431, reason: "Request Header Fields Too Large", slug: "header-fields-too-large",
                   detail: "the request head is larger than \(limit) bytes")
        } else if verdict == .ended, headScanner.announcedBodyTooLarge, !scanningPipelined {
            let maximum = configuration.maximumBodyBytes
            refuse(status: 413, reason: "Content Too Large", slug: "body-too-large",
                   detail: "the request body is larger than \(maximum) bytes")
        } else if verdict == .ended {
            phase = .body
            watchInput(false)
            arm(after: bodyTimeout)
        }
    }

    private func arm(after delay: Int64) {
        let deadline = Instant(nanoseconds: loop.now.nanoseconds &+ delay)
        deadlineAt = deadline
        if let armed = deadlineTimer, armed.deadline <= deadline { return }
        armTimer(at: deadline)
    }

    private func armTimer(at deadline: Instant) {
        deadlineTimer?.cancel()
        // A strong capture: a weak one would give the connection a side table, and every
        // retain and release of it (several per request) would take the runtime's slow path.
        // No cycle outlives the connection: `closed()` cancels the timer, which drops this body.
        deadlineTimer = loop.schedule(at: deadline) { [self] in
            timerFired()
        }
    }

    private func cancelDeadline() {
        deadlineAt = nil
        deadlineTimer?.cancel()
        deadlineTimer = nil
    }

    private func timerFired() {
        deadlineTimer = nil
        guard let deadlineAt else { return }
        if loop.now < deadlineAt {
            armTimer(at: deadlineAt)
            return
        }
        self.deadlineAt = nil
        switch phase {
        case .head:
            refuse(status: 408, reason: "Request Timeout", slug: "request-timeout", detail: "the request head did not arrive in time")
        case .body:
            refuse(status: 408, reason: "Request Timeout", slug: "request-timeout", detail: "the request body did not arrive in time")
        case .idle, .handling, .refused:
            break
        }
    }

    // MARK: - Refusing and closing

    /// Answers with a problem and closes, bypassing `evhttp` (whose parser is mid-request):
    /// reading stops and the unread input is dropped at once; the answer is written straight to
    /// the socket when nothing else is waiting to be sent, and the connection is freed right
    /// after the current libevent callback.
    func refuse(status: Int, reason: String, slug: String, detail: String) {
        guard evhttpConnection != nil else { return }
        if case .refused = phase { return }
        phase = .refused
        cancelDeadline()
        bufferevent_disable(bufferevent, Int16(EV_READ))
        let input = bufferevent_get_input(bufferevent)
        evbuffer_drain(input, evbuffer_get_length(input))
        if evbuffer_get_length(bufferevent_get_output(bufferevent)) == 0 {
            let body = Self.problemBody(status: status, reason: reason, slug: slug, detail: detail)
            let response = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: application/problem+json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            let socket = bufferevent_getfd(bufferevent)
            if socket >= 0 {
                var bytes = Array(response.utf8)
                _ = send(socket, &bytes, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
        }
        loop.execute { [self] in close() }
    }

    /// Closes the connection now (its current request, if any, is dropped unanswered).
    public func close() {
        loop.assertInEventLoop()
        guard let evhttpConnection else { return }
        evhttp_connection_free(evhttpConnection)
    }

    /// libevent is freeing the connection.
    fileprivate func closed() {
        if let evhttpConnection { listener?.forget(evhttpConnection) }
        evhttpConnection = nil
        cancelDeadline()
        if let inputCallback {
            evbuffer_remove_cb_entry(bufferevent_get_input(bufferevent), inputCallback)
            self.inputCallback = nil
        }
        current?.connectionClosing()
        current = nil
        if counted {
            counted = false
            listener?.connectionClosed(self)
        }
        let handler = self.handler
        self.handler = nil
        handler?.connectionClosed()
    }
}

private func httpInputCallback(
    _ buffer: OpaquePointer?, _ info: UnsafePointer<evbuffer_cb_info>?, _ context: UnsafeMutableRawPointer?
) {
    guard let buffer, let info, let context else { return }
    Unmanaged<HTTPConnection>.fromOpaque(context).takeUnretainedValue().inputChanged(buffer, added: info.pointee.n_added)
}

private func httpConnectionClosedCallback(_ connection: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<HTTPConnection>.fromOpaque(context).takeRetainedValue().closed()
}
