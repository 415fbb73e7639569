import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP port on loopback that nothing is bound to now, for a server process whose option treats
/// 0 as "off".
///
/// It is picked below the kernel's ephemeral range (`ip_local_port_range`), where neither a
/// client's connection nor a bind to port 0 elsewhere in the test run can take it before the
/// server binds it; only another explicit bind to the same port could, and the server then fails
/// loudly. When no such port binds, the kernel's pick for port 0.
public func freeLoopbackPort() -> Int? {
    let ephemeralStart = lowestEphemeralPort()
    let lowest = max(1024, ephemeralStart - 10_000)
    if lowest < ephemeralStart {
        for _ in 0..<64 {
            if let port = bindLoopback(port: Int.random(in: lowest..<ephemeralStart)) { return port }
        }
    }
    return bindLoopback(port: 0)
}

/// The first port of the kernel's ephemeral range, or 32768 (Linux's default) when unknown.
private func lowestEphemeralPort() -> Int {
    guard let range = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
        let low = range.split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) })
    else { return 32768 }
    return low
}

/// Runs `body` with a loopback port that refuses connections: a socket is bound to it and never
/// listens, so a connection to it is refused (on Linux, which answers a reset; Darwin drops the
/// connection attempt instead, and a connect waits for its timeout), and no other socket of the
/// test run can take the port while `body` runs (a port freed by closing a server could be).
@discardableResult
public func withRefusingLoopbackPort<T>(_ body: (Int) async throws -> T) async throws -> T {
    guard let bound = boundLoopbackSocket(port: 0) else {
        throw LineClient.Failure(description: "cannot bind a socket on 127.0.0.1")
    }
    defer { close(bound.fd) }
    return try await body(bound.port)
}

/// Binds a socket to `port` on 127.0.0.1 (0: the kernel picks), closes it, and returns the port
/// it was bound to; nil when it does not bind.
private func bindLoopback(port: Int) -> Int? {
    guard let bound = boundLoopbackSocket(port: port) else { return nil }
    close(bound.fd)
    return bound.port
}

/// A TCP socket bound to `port` on 127.0.0.1 (0: the kernel picks), not listening, and the port
/// it is bound to; nil when it does not bind.
private func boundLoopbackSocket(port: Int) -> (fd: Int32, port: Int)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        return nil
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
