import CLibevent
import SluiceCore
import SluiceLibevent

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One outgoing HTTP/1.1 connection on a libevent bufferevent of its loop: the byte-stream
/// sibling of `SluiceLibevent`'s `TCPConnection`, whose line framing cannot carry bodies (a body
/// holds any byte and need not end with an LF).
///
/// It connects without blocking the loop (`bufferevent_socket_connect`, with a timeout), writes
/// what its owner gives it, and splits what it reads into responses with an
/// ``HTTPResponseParser``: the input buffer never holds more than the parser's
/// ``HTTPResponseParser/maximumBufferedBytes`` (the bufferevent stops reading there, and a
/// response that does not fit is an error before that). A malformed response closes the
/// connection. Registered with its loop, so a loop shutting down closes it.
///
/// Every method runs on ``loop``'s thread.
final class HTTPClientConnection: LoopResource, @unchecked Sendable {
    // @unchecked Sendable: all state is touched on `loop`'s thread only (libevent callbacks and
    // jobs queued on the loop); the reference crosses threads only to reach that loop.

    /// Why a connection closed.
    enum CloseReason: Sendable, Hashable, CustomStringConvertible {
        /// The TCP connection could not be established.
        case connectFailed(String)
        /// The server closed its side.
        case endOfStream
        /// A socket error (errno).
        case error(Int32)
        /// The bytes received are not an HTTP response.
        case malformed(HTTPResponseError)
        /// ``close()`` was called.
        case closedLocally
        /// The loop shut down.
        case shutdown

        var description: String {
            switch self {
            case .connectFailed(let reason): "connect failed: \(reason)"
            case .endOfStream: "closed by the server"
            case .error(let code): "socket error: \(errorText(code))"
            case .malformed(let error): "malformed response: \(error)"
            case .closedLocally: "closed by the client"
            case .shutdown: "loop shut down"
            }
        }
    }

    let loop: SluiceLoop
    private let parser: HTTPResponseParser
    private var bufferEvent: OpaquePointer?
    /// Strong until the connection closes (closing drops it, which breaks the cycle with an
    /// owner that holds this connection).
    private var handler: (any HTTPClientHandler)?
    private var connectTimer: LoopTimer?
    /// Whether the TCP connection is established.
    private(set) var isConnected = false

    /// Whether the connection is open or still connecting.
    var isOpen: Bool { bufferEvent != nil }

    private init(loop: SluiceLoop, parser: HTTPResponseParser, bufferEvent: OpaquePointer, handler: any HTTPClientHandler) {
        self.loop = loop
        self.parser = parser
        self.bufferEvent = bufferEvent
        self.handler = handler
    }

    /// Starts connecting to `host:port` (an IP literal or `localhost`) on `loop`, from its
    /// thread. The handler hears ``HTTPClientHandler/httpConnectionOpened(_:)`` once connected,
    /// or ``HTTPClientHandler/httpConnectionClosed(_:reason:)`` with `.connectFailed`, never
    /// from inside this call.
    static func open(
        host: String, port: Int, on loop: SluiceLoop, parser: HTTPResponseParser,
        timeout: Duration = .seconds(5), handler: any HTTPClientHandler
    ) -> HTTPClientConnection? {
        loop.assertInEventLoop()
        guard let bufferEvent = bufferevent_socket_new(loop.base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            return nil
        }
        let connection = HTTPClientConnection(loop: loop, parser: parser, bufferEvent: bufferEvent, handler: handler)
        loop.registerForShutdown(connection)
        connection.connect(host: host, port: port, timeout: timeout)
        return connection
    }

    private func connect(host: String, port: Int, timeout: Duration) {
        guard let bufferEvent else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bufferEvent, httpClientReadCallback, nil, httpClientEventCallback, context)
        // Reading stops while the input holds a response's worth of bytes the parser could not
        // use yet; it cannot fill up with one that fits (see `HTTPResponseParser`).
        bufferevent_setwatermark(bufferEvent, Int16(EV_READ), 0, parser.maximumBufferedBytes)
        bufferevent_enable(bufferEvent, Int16(EV_READ | EV_WRITE))

        let literal = host == "localhost" ? "127.0.0.1" : host
        let text = literal.contains(":") ? "[\(literal)]:\(port)" : "\(literal):\(port)"
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let parsed = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { evutil_parse_sockaddr_port(text, $0, &length) }
        }
        guard parsed == 0, (1...65535).contains(port) else {
            finishLater(.connectFailed("not an IP address literal or localhost with a port 1...65535: \(text)"))
            return
        }
        let started = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bufferevent_socket_connect(bufferEvent, $0, length) }
        }
        guard started == 0 else {
            finishLater(.connectFailed("\(text): \(errorText(errno))"))
            return
        }
        Self.setSocketOptions(bufferevent_getfd(bufferEvent))
        connectTimer = loop.schedule(after: timeout) { [self] in
            if !isConnected { finish(.connectFailed("\(text): timed out")) }
        }
    }

    /// `TCP_NODELAY` (a request is one small write and must not wait for an ACK), and on Darwin
    /// `SO_NOSIGPIPE`.
    private static func setSocketOptions(_ socket: Int32) {
        guard socket >= 0 else { return }
        // libevent opened it without close-on-exec; a socket the loop watches is not to be
        // inherited (its epoll changes are batched: see `SluiceLoop`).
        evutil_make_socket_closeonexec(socket)
        var one: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(socket, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    // MARK: Writing and closing

    /// Appends `bytes` to the output. Returns `false` when the connection is closed.
    @discardableResult
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let bufferEvent else { return false }
        guard let base = bytes.baseAddress else { return true }
        return evbuffer_add(bufferevent_get_output(bufferEvent), base, bytes.count) == 0
    }

    /// Closes the connection now; unwritten output is dropped.
    func close() {
        finish(.closedLocally)
    }

    func closeForShutdown() {
        finish(.shutdown)
    }

    /// Closes from a job of its own (never from inside the call that found the failure).
    private func finishLater(_ reason: CloseReason) {
        loop.execute { [self] in finish(reason) }
    }

    private func finish(_ reason: CloseReason) {
        guard let bufferEvent else { return }
        self.bufferEvent = nil
        connectTimer?.cancel()
        connectTimer = nil
        bufferevent_free(bufferEvent)
        loop.unregisterForShutdown(self)
        let handler = self.handler
        self.handler = nil
        handler?.httpConnectionClosed(self, reason: reason)
    }

    // MARK: Callbacks (loop thread)

    fileprivate func readable() {
        guard let bufferEvent, let handler else { return }
        let input = bufferevent_get_input(bufferEvent)
        let available = evbuffer_get_length(input)
        guard available > 0, let start = evbuffer_pullup(input, -1) else { return }
        let bytes = UnsafeRawBufferPointer(start: start, count: available)
        let consumed: Int
        do {
            consumed = try parser.consume(bytes) { response in
                handler.httpConnection(self, received: response)
                return self.bufferEvent != nil
            }
        } catch {
            finish(.malformed(error))
            return
        }
        // The handler may have closed the connection (its input is gone with it).
        guard self.bufferEvent != nil else { return }
        evbuffer_drain(input, consumed)
    }

    fileprivate func event(_ what: Int16) {
        let what = Int32(what)
        if what & BEV_EVENT_CONNECTED != 0 {
            isConnected = true
            connectTimer?.cancel()
            connectTimer = nil
            handler?.httpConnectionOpened(self)
        } else if what & BEV_EVENT_EOF != 0 {
            // Whatever is left in the input is part of a response that will not complete.
            finish(.endOfStream)
        } else if what & BEV_EVENT_ERROR != 0 {
            let code = errno
            finish(isConnected ? .error(code) : .connectFailed(errorText(code)))
        } else if what & BEV_EVENT_TIMEOUT != 0 {
            finish(.error(ETIMEDOUT))
        }
    }
}

/// `strerror` as text.
private func errorText(_ code: Int32) -> String {
    String(validatingCString: strerror(code)) ?? "errno \(code)"
}

private func httpClientReadCallback(_ bufferEvent: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<HTTPClientConnection>.fromOpaque(context).takeUnretainedValue().readable()
}

private func httpClientEventCallback(_ bufferEvent: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<HTTPClientConnection>.fromOpaque(context).takeUnretainedValue().event(what)
}
