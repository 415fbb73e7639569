import CLibevent
import Logging
import SluiceCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A listening socket on one loop: accepts connections and hands each to a handler.
///
/// The listeners of one server (one per loop) share one listening socket: the first binds it,
/// the others watch a duplicate of its descriptor, and whichever loop wakes first accepts. With
/// `reusePort` each binds its own socket with `SO_REUSEPORT` instead, and the kernel spreads
/// new connections over them and over every other process's sockets on the port.
final class TCPListener: LoopResource, @unchecked Sendable {
    // @unchecked Sendable: created, used and freed on `loop`'s thread only (TCPServer hops there
    // for every call); the reference itself is only carried across threads.

    let loop: SluiceLoop
    let loopIndex: Int
    private var listener: OpaquePointer?
    private let configuration: TCPConfiguration
    /// Dropped when the listener closes: it usually captures the server that owns this
    /// listener, and would keep it alive.
    private var makeHandler: (@Sendable (TCPConnection) -> any TCPConnectionHandler)?
    private let accounting: ConnectionAccounting
    private let refusal: @Sendable () -> [UInt8]
    private let logger: Logger
    /// Accepts refused by the system in the current episode, and the pause before the next try.
    private var refusedAccepts = 0
    private var backoff: Duration = .zero
    private var acceptedCount: UInt64 = 0
    private(set) var openConnections = 0
    /// The port actually bound.
    let port: Int

    init(
        loop: SluiceLoop,
        loopIndex: Int,
        port: Int,
        sharing sharedSocket: Int32? = nil,
        configuration: TCPConfiguration,
        accounting: ConnectionAccounting,
        refusal: @escaping @Sendable () -> [UInt8],
        logger: Logger,
        makeHandler: @escaping @Sendable (TCPConnection) -> any TCPConnectionHandler
    ) throws(SluiceError) {
        loop.assertInEventLoop()
        self.accounting = accounting
        self.refusal = refusal
        self.logger = logger
        self.loop = loop
        self.loopIndex = loopIndex
        self.configuration = configuration
        self.makeHandler = makeHandler

        let listener: OpaquePointer
        if let sharedSocket {
            listener = try Self.watch(loop: loop, duplicateOf: sharedSocket)
        } else {
            listener = try Self.listen(
                loop: loop, host: configuration.host, port: port, backlog: configuration.backlog,
                reusePort: configuration.reusePort)
        }
        self.listener = listener
        self.port = Self.boundPort(of: evconnlistener_get_fd(listener))
        evconnlistener_set_cb(listener, tcpListenerAcceptCallback, Unmanaged.passUnretained(self).toOpaque())
        evconnlistener_set_error_cb(listener, tcpListenerErrorCallback)
        loop.registerForShutdown(self)
    }

    /// Stops accepting; open connections stay open.
    func close() {
        loop.assertInEventLoop()
        guard let listener else { return }
        self.listener = nil
        makeHandler = nil
        evconnlistener_free(listener)
        loop.unregisterForShutdown(self)
    }

    func closeForShutdown() {
        close()
    }

    /// The listening socket's descriptor (while open), for the other loops to share.
    var socket: Int32? {
        listener.map { evconnlistener_get_fd($0) }
    }

    fileprivate func accept(socket: Int32, address: UnsafeMutablePointer<sockaddr>?) {
        guard let makeHandler else {
            // Closed: no connection is accepted any more.
            evutil_closesocket(socket)
            return
        }
        if refusedAccepts > 0 { acceptsResumed() }
        acceptedCount += 1
        let id = acceptedCount << 8 | UInt64(loopIndex & 0xFF)
        guard accounting.admitConnection() else {
            refuse(socket: socket, id: id, address: address)
            return
        }
        let connection: TCPConnection
        do {
            connection = try TCPConnection(
                loop: loop, id: id, socket: socket, remoteAddress: Self.describe(address),
                configuration: configuration, accounting: accounting,
                onClose: { [weak self, accounting] _ in
                    // The listener may be gone (closed and released) while its connections
                    // live on; the process-wide count is the accounting's.
                    self?.openConnections -= 1
                    accounting.connectionClosed()
                })
        } catch {
            accounting.connectionClosed()
            return
        }
        openConnections += 1
        connection.start(handler: makeHandler(connection))
    }

    /// A connection over the cap: it gets the refusal bytes and closes once they are sent (or
    /// after the idle timeout if the peer never takes them). It is not counted as open.
    private func refuse(socket: Int32, id: UInt64, address: UnsafeMutablePointer<sockaddr>?) {
        let connection: TCPConnection
        do {
            connection = try TCPConnection(
                loop: loop, id: id, socket: socket, remoteAddress: Self.describe(address),
                configuration: configuration, onClose: { _ in })
        } catch {
            return
        }
        connection.start(handler: RefusedConnection())
        refusal().withUnsafeBytes { _ = connection.write($0) }
        connection.closeAfterFlush()
    }

    /// `accept` failed. For want of descriptors or memory, accepting pauses (the pending
    /// connection would otherwise wake the loop again at once, forever), then resumes after a
    /// backoff that doubles while the refusals go on. One log line starts an episode and one
    /// ends it.
    fileprivate func acceptFailed(_ error: Int32) {
        guard error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM, let listener else { return }
        refusedAccepts += 1
        if refusedAccepts == 1 {
            backoff = configuration.acceptBackoff
            if accounting.acceptRefusalsBegan() {
                logger.warning(
                    "accept failed; pausing accepts",
                    metadata: [
                        "error": "\(String(validatingCString: strerror(error)) ?? "errno \(error)")",
                        "backoff": "\(backoff)", "connections": "\(accounting.openConnections)",
                    ])
            }
        } else {
            backoff = min(backoff * 2, configuration.acceptBackoff * 16)
        }
        evconnlistener_disable(listener)
        _ = loop.schedule(after: backoff) { [self] in
            if let listener = self.listener { evconnlistener_enable(listener) }
        }
    }

    private func acceptsResumed() {
        if accounting.acceptRefusalsEnded() {
            logger.notice("accepting again", metadata: ["refused": "\(refusedAccepts)"])
        }
        refusedAccepts = 0
    }

    // MARK: - Addresses

    /// A listening socket on `loop` for `host:port`, as an `evconnlistener` with no callback
    /// yet; with `reusePort`, one that other sockets with `SO_REUSEPORT` may share the port with.
    static func listen(
        loop: SluiceLoop, host: String, port: Int, backlog: Int, reusePort: Bool
    ) throws(SluiceError) -> OpaquePointer {
        var storage = sockaddr_storage()
        let length = try parse(host: host, port: port, into: &storage)
        // SO_REUSEADDR lets a restarted server bind while its old connections linger in
        // TIME_WAIT; it never lets two sockets listen on one port (only SO_REUSEPORT does). Port
        // 0 asks the kernel for a free port: without SO_REUSEADDR the port it picks is one no
        // other socket holds.
        let reuseAddress = port == 0 ? 0 : LEV_OPT_REUSEABLE
        let flags =
            reuseAddress | (reusePort ? LEV_OPT_REUSEABLE_PORT : 0) | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC
        let listener = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                evconnlistener_new_bind(loop.base, nil, nil, UInt32(flags), Int32(backlog), address, length)
            }
        }
        guard let listener else {
            let error = errno
            let reason = String(validatingCString: strerror(error)) ?? "errno \(error)"
            if error == EADDRINUSE {
                throw SluiceError(
                    code: .bindFailed,
                    message: "port \(port) is already served by another socket (another server?): \(reason); "
                        + "stop that server, choose another port, or share the port on purpose (reusePort, "
                        + "--reuse-port in sluice-echo; both servers must ask for it)",
                    value: "\(host):\(port)")
            }
            throw SluiceError(code: .bindFailed, message: "cannot listen: \(reason)", value: "\(host):\(port)")
        }
        return listener
    }

    /// A listener on `loop` watching a duplicate of the listening socket `socket` (another
    /// loop's, already bound and listening), closed with it.
    static func watch(loop: SluiceLoop, duplicateOf socket: Int32) throws(SluiceError) -> OpaquePointer {
        let duplicate = fcntl(socket, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else {
            let reason = String(validatingCString: strerror(errno)) ?? "errno \(errno)"
            throw SluiceError(code: .bindFailed, message: "cannot share the listening socket: \(reason)", value: "\(socket)")
        }
        // Backlog 0: the socket listens already. Non-blocking already (the flag belongs to the
        // open file, which the duplicate shares).
        let flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC
        guard let listener = evconnlistener_new(loop.base, nil, nil, UInt32(flags), 0, duplicate) else {
            let reason = String(validatingCString: strerror(errno)) ?? "errno \(errno)"
            evutil_closesocket(duplicate)
            throw SluiceError(code: .bindFailed, message: "cannot share the listening socket: \(reason)", value: "\(socket)")
        }
        return listener
    }

    private static func parse(host: String, port: Int, into storage: inout sockaddr_storage) throws(SluiceError) -> Int32 {
        let literal = host == "localhost" ? "127.0.0.1" : host
        // libevent refuses port 0 in the text: parse with a placeholder, then set the port.
        let text = literal.contains(":") ? "[\(literal)]:1" : "\(literal):1"
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                evutil_parse_sockaddr_port(text, address, &length)
            }
        }
        guard result == 0 else {
            throw SluiceError(code: .invalidOption, message: "not an IP address literal or localhost", value: host)
        }
        let family = Int32(storage.ss_family)
        withUnsafeMutablePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port = UInt16(port).bigEndian }
            } else {
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port = UInt16(port).bigEndian }
            }
        }
        return length
    }

    static func boundPort(of socket: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return port(of: &storage)
    }

    private static func port(of storage: inout sockaddr_storage) -> Int {
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    private static func describe(_ address: UnsafeMutablePointer<sockaddr>?) -> String {
        guard let address else { return "?" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        func decoded() -> String {
            String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        if Int32(address.pointee.sa_family) == AF_INET6 {
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { ipv6 in
                var ip = ipv6.pointee.sin6_addr
                inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count))
                return "[\(decoded())]:\(UInt16(bigEndian: ipv6.pointee.sin6_port))"
            }
        }
        return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 in
            var ip = ipv4.pointee.sin_addr
            inet_ntop(AF_INET, &ip, &text, socklen_t(text.count))
            return "\(decoded()):\(UInt16(bigEndian: ipv4.pointee.sin_port))"
        }
    }
}

private func tcpListenerErrorCallback(_ listener: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    let error = errno
    guard let context else { return }
    Unmanaged<TCPListener>.fromOpaque(context).takeUnretainedValue().acceptFailed(error)
}

/// The handler of a connection refused over the cap: what it reads is dropped.
private final class RefusedConnection: TCPConnectionHandler {
    func connectionOpened(_ connection: TCPConnection) {}
    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) -> Int { bytes.count }
    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}

private func tcpListenerAcceptCallback(
    _ listener: OpaquePointer?, _ socket: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: Int32,
    _ context: UnsafeMutableRawPointer?
) {
    guard let context else { return }
    Unmanaged<TCPListener>.fromOpaque(context).takeUnretainedValue().accept(socket: socket, address: address)
}
