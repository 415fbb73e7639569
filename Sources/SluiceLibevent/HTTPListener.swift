import CLibevent
import Logging
import SluiceCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One loop's part of an ``HTTPServer``: an `evhttp` on the loop's base, listening on the shared
/// port (`SO_REUSEPORT`), and the connections it accepted.
final class HTTPListener: LoopResource, @unchecked Sendable {
    // @unchecked Sendable: created, used and freed on `loop`'s thread only (HTTPServer hops there
    // for every call); the reference itself is only carried across threads.

    let loop: EventLoop
    let loopIndex: Int
    let configuration: HTTPConfiguration
    /// The port actually bound.
    let port: Int
    private var http: OpaquePointer?
    private var boundSocket: OpaquePointer?
    private let accounting: ConnectionAccounting
    private let logger: Logger
    /// Dropped when accepting stops: it usually captures the server that owns this listener.
    private var makeHandler: (@Sendable (HTTPConnection) -> any HTTPConnectionHandler)?
    /// Bufferevents made for connections `evhttp` is setting up, attached right after.
    private var pending: [OpaquePointer] = []
    private var connections: [UnsafeMutableRawPointer: HTTPConnection] = [:]
    private var accepted: UInt64 = 0
    private var refusedAccepts = 0
    private var backoff: Duration = .zero
    private(set) var openConnections = 0

    init(
        loop: EventLoop, loopIndex: Int, port: Int, configuration: HTTPConfiguration,
        accounting: ConnectionAccounting, logger: Logger,
        makeHandler: @escaping @Sendable (HTTPConnection) -> any HTTPConnectionHandler
    ) throws(EventLoopError) {
        loop.assertInEventLoop()
        self.loop = loop
        self.loopIndex = loopIndex
        self.configuration = configuration
        self.accounting = accounting
        self.logger = logger
        self.makeHandler = makeHandler

        let listener = try TCPListener.listen(loop: loop, host: configuration.host, port: port, backlog: configuration.backlog)
        guard let http = evhttp_new(loop.base) else {
            evconnlistener_free(listener)
            throw EventLoopError(code: .bindFailed, message: "evhttp_new failed", input: "\(configuration.host):\(port)")
        }
        self.http = http
        self.port = TCPListener.boundPort(of: evconnlistener_get_fd(listener))
        let context = Unmanaged.passUnretained(self).toOpaque()
        // A head over our limit is refused (431) by the connection's watch before evhttp reads
        // it; evhttp's own limit stays above it as a backstop.
        evhttp_set_max_headers_size(http, configuration.maximumHeadBytes * 2)
        evhttp_set_max_body_size(http, configuration.maximumBodyBytes)
        var idle = timeval(duration: configuration.idleTimeout)
        evhttp_set_timeout_tv(http, &idle)
        let every = EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_POST.rawValue | EVHTTP_REQ_HEAD.rawValue
            | EVHTTP_REQ_PUT.rawValue | EVHTTP_REQ_DELETE.rawValue | EVHTTP_REQ_OPTIONS.rawValue
            | EVHTTP_REQ_TRACE.rawValue | EVHTTP_REQ_CONNECT.rawValue | EVHTTP_REQ_PATCH.rawValue
        evhttp_set_allowed_methods(http, UInt16(every))
        evhttp_set_gencb(http, httpRequestCallback, context)
        evhttp_set_bevcb(http, httpBuffereventCallback, context)
        boundSocket = evhttp_bind_listener(http, listener)
        guard boundSocket != nil else {
            evhttp_free(http)
            self.http = nil
            throw EventLoopError(code: .bindFailed, message: "evhttp_bind_listener failed", input: "\(configuration.host):\(port)")
        }
        HTTPListenerDirectory.shared.register(self, for: http)
        evconnlistener_set_error_cb(listener, httpListenerErrorCallback)
        loop.registerForShutdown(self)
    }

    // MARK: - Connections

    /// `evhttp` wants a bufferevent for a connection it is accepting. The connection object does
    /// not exist yet: attach to it right after this callback.
    fileprivate func makeBufferevent(base: OpaquePointer) -> OpaquePointer? {
        // No BEV_OPT_CLOSE_ON_FREE: evhttp closes the socket itself, as with its own bufferevents.
        guard let bufferevent = bufferevent_socket_new(base, -1, 0) else { return nil }
        // Kept alive until attached, even if evhttp gives up on the connection and frees it.
        bufferevent_incref(bufferevent)
        pending.append(bufferevent)
        if pending.count == 1 {
            loop.execute { [self] in attachPending() }
        }
        return bufferevent
    }

    /// Attaches a connection object to each connection set up since the last call.
    private func attachPending() {
        let bufferevents = pending
        pending.removeAll(keepingCapacity: true)
        for bufferevent in bufferevents {
            attach(bufferevent)
            bufferevent_decref(bufferevent)
        }
    }

    @discardableResult
    private func attach(_ bufferevent: OpaquePointer) -> HTTPConnection? {
        var context: UnsafeMutableRawPointer?
        bufferevent_getcb(bufferevent, nil, nil, nil, &context)
        // No callback argument: evhttp freed the connection already (it failed to set it up).
        guard let evhttpConnection = context.map(OpaquePointer.init) else { return nil }
        if let existing = connections[UnsafeMutableRawPointer(evhttpConnection)] { return existing }
        accepted += 1
        let connection = HTTPConnection(
            loop: loop, id: accepted << 8 | UInt64(loopIndex & 0xFF), listener: self, bufferevent: bufferevent,
            evhttpConnection: evhttpConnection)
        connections[UnsafeMutableRawPointer(evhttpConnection)] = connection
        guard connection.start(accounting: accounting) else {
            connection.refuse(status: 503, reason: "Service Unavailable", slug: "too-many-connections",
                              detail: "the server holds as many connections as it allows")
            return nil
        }
        openConnections += 1
        if refusedAccepts > 0 { acceptsResumed() }
        connection.handler = makeHandler?(connection)
        return connection
    }

    fileprivate func received(_ request: OpaquePointer) {
        guard let evhttpConnection = evhttp_request_get_connection(request) else { return }
        var connection = connections[UnsafeMutableRawPointer(evhttpConnection)]
        if connection == nil, let bufferevent = evhttp_connection_get_bufferevent(evhttpConnection),
            let index = pending.firstIndex(of: bufferevent)
        {
            // A request before the attach job ran: attach now.
            pending.remove(at: index)
            connection = attach(bufferevent)
            bufferevent_decref(bufferevent)
        }
        guard let connection else {
            evhttp_send_error(request, 503, "Service Unavailable")
            return
        }
        connection.received(request)
    }

    func connectionClosed(_ connection: HTTPConnection) {
        openConnections -= 1
        accounting.connectionClosed()
    }

    func forget(_ evhttpConnection: OpaquePointer) {
        connections[UnsafeMutableRawPointer(evhttpConnection)] = nil
    }

    // MARK: - Accepting

    /// Stops accepting; open connections stay open until they close or the loop stops.
    func stopAccepting() {
        loop.assertInEventLoop()
        makeHandler = nil
        guard let http, let boundSocket else { return }
        self.boundSocket = nil
        evhttp_del_accept_socket(http, boundSocket)
    }

    /// Frees everything: every open connection closes.
    func closeForShutdown() {
        stopAccepting()
        guard let http else { return }
        self.http = nil
        HTTPListenerDirectory.shared.unregister(http)
        evhttp_free(http)
        connections.removeAll()
    }

    /// `accept` failed for want of descriptors or memory: pause accepting with a doubling
    /// backoff, one log line per episode.
    fileprivate func acceptFailed(_ error: Int32, listener: OpaquePointer) {
        guard error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM, boundSocket != nil else { return }
        refusedAccepts += 1
        if refusedAccepts == 1 {
            backoff = .milliseconds(50)
            if accounting.acceptRefusalsBegan() {
                logger.warning(
                    "accept failed; pausing accepts",
                    metadata: ["error": "\(String(validatingCString: strerror(error)) ?? "errno \(error)")", "backoff": "\(backoff)"])
            }
        } else {
            backoff = min(backoff * 2, .milliseconds(800))
        }
        evconnlistener_disable(listener)
        loop.schedule(after: backoff) { [self] in
            if let boundSocket { evconnlistener_enable(evhttp_bound_socket_get_listener(boundSocket)) }
        }
    }

    private func acceptsResumed() {
        if accounting.acceptRefusalsEnded() {
            logger.notice("accepting again", metadata: ["refused": "\(refusedAccepts)"])
        }
        refusedAccepts = 0
    }
}

/// Finds the listener of an `evhttp` from libevent's accept-error callback, whose argument is
/// the `evhttp` itself.
final class HTTPListenerDirectory: Sendable {
    static let shared = HTTPListenerDirectory()
    private let listeners = Mutex<[UInt: Unmanaged<HTTPListener>]>([:])

    func register(_ listener: HTTPListener, for http: OpaquePointer) {
        listeners.withSanitizedLock { $0[UInt(bitPattern: Int(bitPattern: UnsafeMutableRawPointer(http)))] = .passUnretained(listener) }
    }

    func unregister(_ http: OpaquePointer) {
        _ = listeners.withSanitizedLock { $0.removeValue(forKey: UInt(bitPattern: Int(bitPattern: UnsafeMutableRawPointer(http)))) }
    }

    func listener(for http: UnsafeMutableRawPointer) -> HTTPListener? {
        listeners.withSanitizedLock { $0[UInt(bitPattern: Int(bitPattern: http))]?.takeUnretainedValue() }
    }
}

private func httpRequestCallback(_ request: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let request, let context else { return }
    Unmanaged<HTTPListener>.fromOpaque(context).takeUnretainedValue().received(request)
}

private func httpBuffereventCallback(_ base: OpaquePointer?, _ context: UnsafeMutableRawPointer?) -> OpaquePointer? {
    guard let base, let context else { return nil }
    return Unmanaged<HTTPListener>.fromOpaque(context).takeUnretainedValue().makeBufferevent(base: base)
}

private func httpListenerErrorCallback(_ listener: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    let error = errno
    guard let listener, let context, let owner = HTTPListenerDirectory.shared.listener(for: context) else { return }
    owner.acceptFailed(error, listener: listener)
}
