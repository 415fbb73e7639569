import CLibevent
import SluiceCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Outgoing TCP connections: the client side of ``TCPConnection``.
///
/// A client connection is an ordinary ``TCPConnection`` on a loop: the same bounds and the same
/// output backpressure (the line front adds a `connect` that cuts lines with the server's
/// framer). Only how the socket is opened differs.
///
/// ```swift
/// let connection = try await TCPClient.connect(host: "127.0.0.1", port: 7070, on: loop) { _ in
///     MyReplyHandler()
/// }
/// connection.write("1 PING\n")
/// ```
public enum TCPClient {
    /// Client connection ids count down from the top of the id space so they never collide with
    /// a server's accepted connections (`counter << 8 | loopIndex`) in the same process.
    private static let nextID = Atomic<UInt64>(UInt64.max)

    /// Connects to `host:port`, then starts a ``TCPConnection`` for the socket on `loop` and
    /// hands its bytes to the handler `makeHandler` returns (called on the loop thread).
    ///
    /// The TCP handshake runs on the caller's thread with a timeout (a non-blocking `connect`
    /// and `poll`), not on the loop: on loopback it completes at once; to a remote host it may
    /// take up to `timeout`.
    ///
    /// - Parameters:
    ///   - host: an IPv4 or IPv6 literal, or `localhost`.
    ///   - port: the server's port.
    ///   - loop: the loop the connection runs on.
    ///   - configuration: output watermarks and idle timeout for the connection (its `host`,
    ///     `port` and `backlog` are not used). The default has no idle timeout.
    ///   - timeout: how long the TCP handshake may take.
    ///   - makeHandler: makes the connection's byte handler, on the loop thread.
    /// - Throws: `SluiceError`: `.invalidOption` for a bad address or port, `.bindFailed`
    ///   when the connection is refused, times out or the socket cannot be created.
    public static func connect(
        host: String,
        port: Int,
        on loop: SluiceLoop,
        configuration: TCPConfiguration = TCPConfiguration(idleTimeout: nil),
        timeout: Duration = .seconds(5),
        makeHandler: @escaping @Sendable (TCPConnection) -> any TCPConnectionHandler
    ) async throws(SluiceError) -> TCPConnection {
        try configuration.validate()
        guard (1...65535).contains(port) else {
            throw SluiceError(code: .invalidOption, message: "port must be 1...65535", value: "\(port)")
        }
        let socket = try openSocket(host: host, port: port, timeout: timeout)
        let id = nextID.wrappingSubtract(1, ordering: .relaxed).oldValue
        let remote = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return try await loop.submit { () throws(SluiceError) -> TCPConnection in
            let connection = try TCPConnection(
                loop: loop, id: id, socket: socket, remoteAddress: remote, configuration: configuration,
                onClose: { _ in })
            connection.start(handler: makeHandler(connection))
            return connection
        }
    }

    /// Opens a connected, non-blocking socket to `host:port` (``TCPConnection`` sets the
    /// per-connection options).
    private static func openSocket(host: String, port: Int, timeout: Duration) throws(SluiceError) -> Int32 {
        let literal = host == "localhost" ? "127.0.0.1" : host
        let text = literal.contains(":") ? "[\(literal)]:\(port)" : "\(literal):\(port)"
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let parsed = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { evutil_parse_sockaddr_port(text, $0, &length) }
        }
        guard parsed == 0 else {
            throw SluiceError(code: .invalidOption, message: "not an IP address literal or localhost", value: host)
        }
        let socket = systemSocket(Int32(storage.ss_family), Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else {
            throw SluiceError(code: .bindFailed, message: "socket() failed: \(errnoText())", value: text)
        }
        evutil_make_socket_nonblocking(socket)
        evutil_make_socket_closeonexec(socket)

        let started = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { systemConnect(socket, $0, socklen_t(length)) }
        }
        if started != 0 && errno != EINPROGRESS {
            let reason = errnoText()
            systemClose(socket)
            throw SluiceError(code: .bindFailed, message: "connect failed: \(reason)", value: text)
        }
        if started != 0 {
            var descriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(clamping: max(1, timeout.nanosecondsClamped / 1_000_000))
            var ready: Int32
            repeat {
                ready = poll(&descriptor, 1, milliseconds)
            } while ready < 0 && errno == EINTR
            guard ready > 0 else {
                systemClose(socket)
                throw SluiceError(code: .bindFailed, message: "connect timed out", value: text)
            }
            var failure: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(socket, SOL_SOCKET, SO_ERROR, &failure, &size)
            guard failure == 0 else {
                systemClose(socket)
                let reason = String(validatingCString: strerror(failure)) ?? "errno \(failure)"
                throw SluiceError(code: .bindFailed, message: "connect failed: \(reason)", value: text)
            }
        }
        return socket
    }

    private static func errnoText() -> String {
        String(validatingCString: strerror(errno)) ?? "errno \(errno)"
    }
}

// The libc calls under names that `TCPClient.connect` and local `socket` variables do not
// shadow (at file scope the plain names are libc's).
private func systemSocket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 {
    socket(domain, type, proto)
}

private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}

private func systemClose(_ fd: Int32) {
    _ = close(fd)
}
