import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP line client for tests: connect, send bytes, read LF-terminated lines with a timeout.
///
/// Reads block a thread of their own, never the caller's: a test awaiting a reply must not hold
/// one of Swift's cooperative threads (two on a two-core machine), which the other tests, and
/// the replies they wait for, need.
public final class LineClient: @unchecked Sendable {
    // @unchecked Sendable: `send` touches only the socket, which the kernel serialises; the
    // read buffer belongs to whichever single thread reads. Tests send from one thread while
    // reading on another.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    private let socket: Int32
    private var buffer: [UInt8] = []

    /// Connects to `host:port`; a send or a read that waits `timeoutSeconds` (times
    /// ``deadlineScale``, as for ``pollUntil(seconds:_:)``: a timeout only detects a hang) fails.
    /// The default is generous: in a full parallel run under a sanitizer on two cores, an
    /// answer has taken more than 20 s to come.
    /// `receiveBufferBytes` sets the socket's receive buffer before it connects (a client that
    /// reads little, whose window stays small).
    public init(port: Int, host: String = "127.0.0.1", timeoutSeconds: Int = 15, receiveBufferBytes: Int? = nil) throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed") }
        if var size = receiveBufferBytes.map(Int32.init(clamping:)) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw Failure(description: "connect to \(host):\(port) failed: errno \(errno)")
        }
        var timeout = timeval(tv_sec: timeoutSeconds * deadlineScale, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.socket = fd
    }

    private var isOpen = true

    deinit {
        if isOpen { Glibc.close(socket) }
    }

    /// Closes the connection with a reset (`SO_LINGER` 0), as a client that crashed or timed out
    /// does: the server sees the connection fail at once, not a half-close.
    public func abort() {
        guard isOpen else { return }
        isOpen = false
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        Glibc.close(socket)
    }

    /// Sends all of `text`'s bytes.
    public func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    /// Sends all of `bytes`.
    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            sent += n
        }
    }

    /// Whether the server has sent something not read yet, or closed, without waiting.
    public var hasInputNow: Bool {
        if !buffer.isEmpty { return true }
        var byte: UInt8 = 0
        return Glibc.recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) >= 0
    }

    /// Reads one line (without its LF); throws on timeout or end of stream.
    public func readLine() async throws -> String {
        try await offThread { try self.readLineBlocking() }
    }

    /// Reads `count` lines.
    public func readLines(_ count: Int) async throws -> [String] {
        try await offThread { try (0..<count).map { _ in try self.readLineBlocking() } }
    }

    /// Reads up to `count` lines, stopping early (without an error) at a timeout.
    public func readLines(_ count: Int, orUntilTimeout: Bool) async throws -> [String] {
        try await offThread {
            var lines: [String] = []
            while lines.count < count {
                do {
                    lines.append(try self.readLineBlocking())
                } catch {
                    if orUntilTimeout { break }
                    throw error
                }
            }
            return lines
        }
    }

    /// Reads exactly `count` bytes (after any line already buffered).
    public func readExactly(_ count: Int) async throws -> [UInt8] {
        try await offThread { try self.readExactlyBlocking(count) }
    }

    /// Reads one line (CR LF or LF ended, the end not included) on the calling thread.
    public func readLineBlockingWithoutCR() throws -> String {
        var line = try readLineBlocking()
        if line.hasSuffix("\r") { line.removeLast() }
        return line
    }

    /// Reads exactly `count` bytes on the calling thread.
    public func readExactlyBlocking(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill() else { throw Failure(description: "end of stream before \(count) bytes") }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeSubrange(..<count)
        return bytes
    }

    /// Runs `read` (blocking reads of this client) on a thread of its own.
    public func readOffThread<Result: Sendable>(_ read: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await offThread(read)
    }

    /// Whether the server closed the connection (reads until end of stream or timeout).
    public func waitForClose() async throws -> Bool {
        try await offThread {
            while try self.fill() {}
            return true
        }
    }

    private func readLineBlocking() throws -> String {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            guard try fill() else { throw Failure(description: "end of stream before a full line") }
        }
    }

    /// Runs a blocking read on a thread of its own.
    private func offThread<Result: Sendable>(_ read: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Swift.Result { try read() }) }.start()
        }
    }

    /// Half-closes the sending side.
    public func shutdownWrite() {
        Glibc.shutdown(socket, Int32(SHUT_WR))
    }

    /// Reads what is available into the buffer; false at end of stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let n = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        if n == 0 { return false }
        guard n > 0 else { throw Failure(description: "recv failed or timed out: errno \(errno)") }
        buffer.append(contentsOf: chunk[..<n])
        return true
    }
}
