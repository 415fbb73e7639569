import Foundation
import SluiceCore
import SluiceTestSupport
import SluiceLibevent
import SluiceLineProtocol
import Synchronization
import Testing

/// What the test echo handlers observed, across loops.
private final class Observations: Sendable {
    let connections = Mutex<[TCPConnection]>([])
    let closeReasons = Mutex<[TCPConnection.CloseReason]>([])
    let opened = Atomic<Int>(0)
}

/// Echoes lines; reports an overlong line the way sluice-echo does.
private final class TestEchoHandler: TCPLineHandler {
    let observations: Observations
    init(observations: Observations) { self.observations = observations }

    func connectionOpened(_ connection: TCPConnection) {
        observations.opened.add(1, ordering: .relaxed)
        observations.connections.withSanitizedLock { $0.append(connection) }
    }

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        var reply = Array(line)
        reply.append(0x0A)
        reply.withUnsafeBytes { _ = connection.write($0) }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        connection.write("- ERR line-too-long\n")
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        observations.closeReasons.withSanitizedLock { $0.append(reason) }
    }
}

/// Echoes lines, and at the first line queues a job on the loop that records how many lines
/// the connection had handed over when it ran: a job queued on the loop runs once the current
/// callback has returned, so the figure is how many lines one turn handled.
private final class TurnProbeHandler: TCPLineHandler, Sendable {
    let handled = Atomic<Int>(0)
    let handledWhenJobRan = Atomic<Int>(-1)

    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        if handled.add(1, ordering: .relaxed).newValue == 1 {
            connection.loop.execute { [self] in
                handledWhenJobRan.store(handled.load(ordering: .relaxed), ordering: .relaxed)
            }
        }
        var reply = Array(line)
        reply.append(0x0A)
        reply.withUnsafeBytes { _ = connection.write($0) }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {}

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}

/// Starts an echo server on a fresh group, runs `body`, then shuts everything down.
private func withEchoServer(
    loops: Int = 2,
    clock: ManualLoopClock? = nil,
    configure: (inout TCPConfiguration, inout LineFraming) -> Void = { _, _ in },
    _ body: (TCPServer, Observations) async throws -> Void
) async throws {
    let group = try SluiceLoopGroup(loopCount: loops, namePrefix: "tcp-test", clock: clock)
    var configuration = TCPConfiguration(port: 0)
    var framing = LineFraming()
    configure(&configuration, &framing)
    let observations = Observations()
    do {
        let server = try await TCPServer.bind(group: group, configuration: configuration, framing: framing) { _ in
            TestEchoHandler(observations: observations)
        }
        try await body(server, observations)
    } catch {
        group.shutdownGracefully()
        throw error
    }
    group.shutdownGracefully()
}

@Suite struct TCPServerTests {
    @Test func echoesLinesOverRealSockets() async throws {
        try await withEchoServer { server, _ in
            let client = try LineClient(port: server.port)
            try client.send("hello\r\nworld\n\nlast\n")
            #expect(try await client.readLines(4) == ["hello", "world", "", "last"])
        }
    }

    @Test func manyConnectionsOverEveryLoop() async throws {
        try await withEchoServer(loops: 2) { server, observations in
            let clients = try (0..<20).map { _ in try LineClient(port: server.port) }
            for (index, client) in clients.enumerated() {
                try client.send("client \(index) a\nclient \(index) b\n")
            }
            for (index, client) in clients.enumerated() {
                #expect(try await client.readLines(2) == ["client \(index) a", "client \(index) b"])
            }
            #expect(await server.connectionCount() == 20)
            let opened = observations.opened.load(ordering: .relaxed)
            #expect(opened == 20)
        }
    }

    @Test func oneMebibyteLineWithoutLFGetsAnErrorAndTheConnectionStaysUsable() async throws {
        try await withEchoServer { server, _ in
            let client = try LineClient(port: server.port)
            try client.send("before\n")
            #expect(try await client.readLine() == "before")
            // No LF yet: the error must come as soon as the line is known to be too long.
            try client.send([UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20))
            #expect(try await client.readLine() == "- ERR line-too-long")
            // The rest of the long line is skipped up to its LF; the next line is echoed.
            try client.send(String(repeating: "y", count: 10_000) + "\nnext\n")
            #expect(try await client.readLine() == "next")
        }
    }

    @Test func maximumLineLengthIsConfigurable() async throws {
        try await withEchoServer(configure: { $1.maximumLineLength = 4 }) { server, _ in
            let client = try LineClient(port: server.port)
            try client.send("1234\n12345\nok\n")
            #expect(try await client.readLines(3) == ["1234", "- ERR line-too-long", "ok"])
        }
    }

    /// A pipelined connection hands over lines for at most its turn, then lets the loop serve
    /// everything else before it goes on; none of its lines is lost or reordered.
    @Test func aConnectionYieldsItsTurnAndLosesNothing() async throws {
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "turn-test")
        defer { group.shutdownGracefully() }
        let probe = TurnProbeHandler()
        // A turn that is over at the first look at the clock: 16 lines.
        let server = try await TCPServer.bind(group: group, configuration: TCPConfiguration(port: 0, turnDuration: .nanoseconds(1))) { _ in probe }
        let client = try LineClient(port: server.port, timeoutSeconds: 20)
        let lines = (0..<5_000).map { "line \($0)" }
        try client.send(lines.joined(separator: "\n") + "\n")
        #expect(try await client.readLines(lines.count) == lines)
        #expect(probe.handledWhenJobRan.load(ordering: .relaxed) == 16)

        // Without a turn, the whole read is handed over in one go.
        let untimed = TurnProbeHandler()
        let second = try await TCPServer.bind(group: group, configuration: TCPConfiguration(port: 0, turnDuration: nil)) { _ in untimed }
        let other = try LineClient(port: second.port, timeoutSeconds: 20)
        try other.send(lines.joined(separator: "\n") + "\n")
        #expect(try await other.readLines(lines.count) == lines)
        #expect(untimed.handledWhenJobRan.load(ordering: .relaxed) > 16)
    }

    @Test func stopsReadingWhenThePeerDoesNotDrainAndResumes() async throws {
        try await withEchoServer(configure: {
            $0.outputHighWatermark = 64 << 10
            $0.outputLowWatermark = 16 << 10
            // Backpressure only: no line timer (under a sanitizer, with both cores busy, a line
            // the server has begun can wait longer than the default 10 s for its next bytes).
            $1.lineTimeout = nil
        }) { server, observations in
            let client = try LineClient(port: server.port, timeoutSeconds: 20)
            let line = String(repeating: "z", count: 1000)
            // ~24 MB of echoes: more than the loopback socket buffers of both directions hold,
            // so the server's own output must grow past the high watermark.
            let lines = 24_000
            // Send everything from another thread and read nothing until the server has
            // paused: it must stop reading once its output passes the high watermark, or it
            // would buffer without bound.
            let sendFailure = Mutex<(any Error)?>(nil)
            let sender = Thread {
                do {
                    for index in 0..<lines {
                        try client.send("\(index) \(line)\n")
                    }
                } catch {
                    sendFailure.withSanitizedLock { $0 = error }
                }
            }
            sender.start()
            try await pollUntil(seconds: 15) {
                guard let connection = observations.connections.withSanitizedLock({ $0.first }) else { return false }
                return await connection.loop.submit { connection.isReadingPaused }
            }
            // Now drain: reading resumes below the low watermark and every echo arrives in order.
            var received = 0
            while received < lines {
                let reply: String
                do {
                    reply = try await client.readLine()
                } catch {
                    let reasons = observations.closeReasons.withSanitizedLock { $0 }
                    let sending = sendFailure.withSanitizedLock { $0 }.map { "the sender failed: \($0)" } ?? "the sender did not fail"
                    Issue.record("after \(received) echoes: \(error); the server closed for \(reasons); \(sending)")
                    throw error
                }
                if reply != "\(received) \(line)" {
                    Issue.record("echo \(received) was \(reply.prefix(20))…")
                    break
                }
                received += 1
            }
            #expect(received == lines)
            #expect(sendFailure.withSanitizedLock { $0 } == nil)
        }
    }

    /// On a manual loop clock: a connection silent for just under its idle timeout is still
    /// served (which starts its silence again); silent for the whole timeout, it is closed.
    @Test func idleConnectionsAreClosed() async throws {
        let clock = ManualLoopClock()
        try await withEchoServer(loops: 1, clock: clock, configure: { tcp, _ in tcp.idleTimeout = .seconds(300) }) { server, observations in
            let client = try LineClient(port: server.port)
            try client.send("ping\n")
            #expect(try await client.readLine() == "ping")
            clock.advance(by: .seconds(299))
            try client.send("again\n")
            #expect(try await client.readLine() == "again")
            clock.advance(by: .seconds(299))
            // A round trip on another connection of the same loop: whatever the advance made
            // the loop do is done by the time it is answered.
            let barrier = try LineClient(port: server.port)
            try barrier.send("barrier\n")
            #expect(try await barrier.readLine() == "barrier")
            #expect(!client.hasInputNow)
            clock.advance(by: .seconds(1))
            #expect(try await client.waitForClose())
            #expect(observations.closeReasons.withSanitizedLock { $0 } == [.idleTimeout])
        }
    }

    /// On a manual loop clock, a closed connection's deadline leaves the clock with it.
    @Test func aClosedConnectionLeavesNoDeadline() async throws {
        let clock = ManualLoopClock()
        try await withEchoServer(loops: 1, clock: clock, configure: { tcp, _ in tcp.idleTimeout = .seconds(300) }) { server, _ in
            do {
                let client = try LineClient(port: server.port)
                try client.send("ping\n")
                #expect(try await client.readLine() == "ping")
                try await pollUntil { clock.nextDeadline == clock.now + .seconds(300) }
            }
            try await pollUntil { await server.connectionCount() == 0 }
            #expect(clock.nextDeadline == nil)
        }
    }

    @Test func peerCloseIsReported() async throws {
        try await withEchoServer { server, observations in
            do {
                let client = try LineClient(port: server.port)
                try client.send("bye\n")
                #expect(try await client.readLine() == "bye")
            }
            // The client is gone; wait until the server has seen it.
            try await pollUntil { await server.connectionCount() == 0 }
            #expect(observations.closeReasons.withSanitizedLock { $0 } == [.endOfStream])
        }
    }

    /// A forgotten server on the port is an error, not a silent second instance; two servers
    /// that both ask to share the port share it; one that does not cannot join them.
    @Test func aPortAnotherSocketServesIsRefusedUnlessBothShareIt() async throws {
        let group = try SluiceLoopGroup(loopCount: 2, namePrefix: "port-test")
        defer { group.shutdownGracefully() }
        let observations = Observations()
        let first = try await TCPServer.bind(group: group, configuration: .init(port: 0)) { _ in
            TestEchoHandler(observations: observations)
        }
        for reusePort in [false, true] {
            do {
                _ = try await TCPServer.bind(group: group, configuration: .init(port: first.port, reusePort: reusePort)) { _ in
                    TestEchoHandler(observations: observations)
                }
                Issue.record("a second server bound a port the first serves (reusePort: \(reusePort))")
            } catch let error as SluiceError {
                #expect(error.code == .bindFailed)
                #expect(error.message.contains("port \(first.port) is already served by another socket"), "\(error)")
            }
        }
        // Its two loops share its one socket: every connection is served.
        let clients = try (0..<8).map { _ in try LineClient(port: first.port) }
        for (index, client) in clients.enumerated() { try client.send("c\(index)\n") }
        for (index, client) in clients.enumerated() { #expect(try await client.readLines(1) == ["c\(index)"]) }
        await first.stopAccepting()

        let sharedA = try await TCPServer.bind(group: group, configuration: .init(port: 0, reusePort: true)) { _ in
            TestEchoHandler(observations: observations)
        }
        let sharedB = try await TCPServer.bind(group: group, configuration: .init(port: sharedA.port, reusePort: true)) { _ in
            TestEchoHandler(observations: observations)
        }
        #expect(sharedB.port == sharedA.port)
        await #expect(throws: SluiceError.self) {
            _ = try await TCPServer.bind(group: group, configuration: .init(port: sharedA.port)) { _ in
                TestEchoHandler(observations: observations)
            }
        }
        let client = try LineClient(port: sharedA.port)
        try client.send("shared\n")
        #expect(try await client.readLines(1) == ["shared"])
        await sharedA.stopAccepting()
        await sharedB.stopAccepting()
    }

    @Test func badConfigurationAndAddressesAreRefused() async throws {
        let group = try SluiceLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully() }
        await #expect(throws: SluiceError.self) {
            _ = try await TCPServer.bind(group: group, configuration: .init(host: "not-an-ip", port: 0)) { _ in
                TestEchoHandler(observations: Observations())
            }
        }
        await #expect(throws: SluiceError.self) {
            _ = try await TCPServer.bind(group: group, configuration: .init(port: 70_000)) { _ in
                TestEchoHandler(observations: Observations())
            }
        }
        await #expect(throws: SluiceError.self) {
            _ = try await TCPServer.bind(group: group, configuration: .init(host: "192.0.2.1", port: 0)) { _ in
                TestEchoHandler(observations: Observations())
            }
        }
    }
}
