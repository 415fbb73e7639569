import Dispatch
import Glibc
import SluiceCore
import SluiceLibevent
import SluiceLineProtocol
import SluiceTestSupport
import Synchronization
import Testing

/// What the closing handler saw, across threads.
private final class ClosingLog: Sendable {
    let events = Mutex<[String]>([])
    let connections = Mutex<[TCPConnection]>([])
}

/// `big` writes 12 MB of 1000-byte lines; `close-after X` writes X, then `closeAfterFlush()`;
/// anything else is echoed.
private final class ClosingHandler: TCPLineHandler {
    let log: ClosingLog
    init(log: ClosingLog) { self.log = log }

    func connectionOpened(_ connection: TCPConnection) {
        log.connections.withSanitizedLock { $0.append(connection) }
    }

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        let text = String(decoding: line, as: UTF8.self)
        if text == "big" {
            let chunk = String(repeating: "x", count: 999) + "\n"
            for _ in 0..<12_000 { connection.write(chunk) }
        } else if text.hasPrefix("close-after ") {
            connection.write(String(text.dropFirst("close-after ".count)) + "\n")
            connection.closeAfterFlush()
        } else {
            connection.write(text + "\n")
        }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {}

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        log.events.withSanitizedLock { $0.append("closed \(reason)") }
    }
}

private func withClosingServer(
    clock: ManualLoopClock? = nil,
    configure: (inout TCPConfiguration) -> Void = { _ in },
    _ body: (TCPServer, ClosingLog) async throws -> Void
) async throws {
    let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "closing", clock: clock)
    var configuration = TCPConfiguration(port: 0)
    configure(&configuration)
    let log = ClosingLog()
    do {
        let server = try await TCPServer.bind(group: group, configuration: configuration) { _ in ClosingHandler(log: log) }
        try await body(server, log)
    } catch {
        group.shutdownGracefully()
        throw error
    }
    group.shutdownGracefully()
}

/// Every line until the server closes, without the `big` filler.
private func linesUntilClose(_ client: LineClient) async -> [String] {
    var lines: [String] = []
    while let line = try? await client.readLine() {
        if !line.hasPrefix("xxx") { lines.append(line) }
    }
    return lines
}

@Suite struct TCPConnectionClosingTests {
    /// Replies of a read batch go straight to the socket when they fit: whether they did must
    /// not change which of the batch's lines are handled after `closeAfterFlush()`.
    @Test func linesAfterCloseAfterFlushAreDroppedWhateverTheSocketTook() async throws {
        try await withClosingServer { server, log in
            let small = try LineClient(port: server.port)
            try small.send("close-after bye\nafter\n")
            #expect(await linesUntilClose(small) == ["bye"])
            // 12 MB first: the socket takes part of the batch, the rest waits in the output.
            let large = try LineClient(port: server.port)
            try large.send("big\nclose-after bye\nafter\n")
            // Read only once the server holds output the socket did not take.
            try await pollUntil {
                guard let connection = log.connections.withSanitizedLock({ $0.count == 2 ? $0[1] : nil }) else { return false }
                return await connection.loop.submit { connection.pendingOutputBytes > 0 }
            }
            #expect(await linesUntilClose(large) == ["bye"])
        }
    }

    /// A reset noticed by the write at the end of a read batch is reported as a reset.
    @Test func aResetSeenByTheBatchWriteIsReportedAsAReset() async throws {
        try await withClosingServer { server, log in
            // Closed once, below, with a reset: a second close here could close a descriptor
            // another test running in parallel has been given since.
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(server.port).bigEndian
            inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            #expect(connected == 0)
            try await pollUntil { log.connections.withSanitizedLock { !$0.isEmpty } }
            let connection = try #require(log.connections.withSanitizedLock { $0.first })
            // Hold the loop until the request and the reset have both arrived, so that one read
            // sees both: the reply's write at the end of that batch meets the reset.
            let held = Atomic<Bool>(false)
            let release = DispatchSemaphore(value: 0)
            // Whatever fails below, the loop thread goes on (its server's shutdown joins it).
            defer { release.signal() }
            connection.loop.execute {
                held.store(true, ordering: .releasing)
                release.wait()
            }
            try await pollUntil { held.load(ordering: .acquiring) }
            _ = "x\n".withCString { send(fd, $0, 2, Int32(MSG_NOSIGNAL)) }
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(fd)
            // Loopback delivers both segments within the calls above.
            release.signal()
            try await pollUntil { await server.connectionCount() == 0 }
            #expect(log.events.withSanitizedLock { $0 } == ["closed error(\(ECONNRESET))"])
        }
    }

    /// A peer that stops reading: the server pauses reading (backpressure), so no read can time
    /// out; the idle timeout still closes the connection once its output has made no progress
    /// for that long.
    @Test func aPeerThatStopsReadingIsClosedByTheIdleTimeout() async throws {
        let clock = ManualLoopClock()
        try await withClosingServer(clock: clock, configure: { $0.idleTimeout = .seconds(300) }) { server, log in
            let client = try LineClient(port: server.port)
            try client.send("big\n")
            try await pollUntil {
                guard let connection = log.connections.withSanitizedLock({ $0.first }) else { return false }
                return await connection.loop.submit { connection.isReadingPaused }
            }
            // Its output has made no progress for the whole idle timeout (on the loop's manual
            // clock): it is closed.
            clock.advance(by: .seconds(300))
            try await pollUntil { await server.connectionCount() == 0 }
            #expect(log.events.withSanitizedLock { $0 } == ["closed idleTimeout"])
        }
    }
}
