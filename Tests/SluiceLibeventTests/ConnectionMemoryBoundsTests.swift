import Foundation
import SluiceCore
@testable import SluiceLibevent
import SluiceLineProtocol
import SluiceTestSupport
import Synchronization
import Testing

/// Echoes lines and counts the bytes it echoed; keeps its connections.
private final class CountingEchoHandler: TCPLineHandler, Sendable {
    let echoed = Atomic<Int>(0)
    let connections = Mutex<[TCPConnection]>([])

    func connectionOpened(_ connection: TCPConnection) {
        connections.withSanitizedLock { $0.append(connection) }
    }

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        var reply = Array(line)
        reply.append(0x0A)
        reply.withUnsafeBytes { _ = connection.write($0) }
        echoed.add(reply.count, ordering: .relaxed)
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {}
    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}

/// Sends `lines` lines of `length` bytes from a thread of its own, and stops at the first
/// failure. The test stops it before it aborts the client: a send still running when the socket
/// is closed could write to another test's socket that reused the descriptor.
private func sendFromThread(_ client: LineClient, lines: Int, length: Int) -> LineSender {
    let sender = LineSender(client: client)
    let line = String(repeating: "m", count: length - 1) + "\n"
    Thread {
        defer { sender.finished.signal() }
        for _ in 0..<lines {
            do { try client.send(line) } catch { return }
        }
    }.start()
    return sender
}

/// The thread of ``sendFromThread(_:lines:length:)``.
private struct LineSender: Sendable {
    let client: LineClient
    let finished = DispatchSemaphore(value: 0)

    /// Ends the client's sending side, which wakes a send blocked on a full window, and waits
    /// until the thread has returned.
    func stop() {
        client.shutdownWrite()
        finished.wait()
    }
}

/// What a peer that sends and never reads can make the server hold: its answers parked in the
/// kernel, and its share of the process's buffer budget.
@Suite struct ConnectionMemoryBoundsTests {
    /// A peer with a tiny receive window that never reads: the kernel keeps at most the unsent
    /// limit of its answers (plus what is in flight), the connection's buffer at most its high
    /// watermark and one read's worth, and then the connection stops reading. Without the
    /// limit the kernel's send buffer grows to megabytes first.
    @Test func aPeerThatDoesNotReadParksLittleInTheKernel() async throws {
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "unsent-test")
        defer { group.shutdownGracefully() }
        let handler = CountingEchoHandler()
        let configuration = TCPConfiguration(port: 0, socketUnsentLimit: 16 << 10)
        let server = try await TCPServer.bind(group: group, configuration: configuration, framing: LineFraming(lineTimeout: nil)) { _ in handler }
        let client = try LineClient(port: server.port, timeoutSeconds: 30, receiveBufferBytes: 4096)
        defer { client.abort() }
        let sender = sendFromThread(client, lines: 8_000, length: 1_000)
        defer { sender.stop() }
        try await pollUntil(seconds: 15) {
            guard let connection = handler.connections.withSanitizedLock({ $0.first }) else { return false }
            return await connection.loop.submit { connection.isReadingPaused }
        }
        let echoed = handler.echoed.load(ordering: .relaxed)
        // 16 KiB unsent, a few KiB in flight, 64 KiB over the high watermark and one read's
        // worth of lines handled before the pause took effect: well under 256 KiB.
        #expect(echoed < 256 << 10, "the server echoed \(echoed) bytes before it stopped reading")
    }

    /// Once the process is over its buffer budget, a connection holding less than the floor is
    /// still read, but only up to the floor: 32 peers that never read cannot each take a whole
    /// read (64 KiB) past the budget and leave what the kernel does not take of its echo.
    @Test func overTheBudgetAConnectionReadsOnlyUpToTheFloor() async throws {
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "budget-test")
        defer { group.shutdownGracefully() }
        let handler = CountingEchoHandler()
        let budget = 128 << 10
        let configuration = TCPConfiguration(port: 0, connectionBufferBudget: budget)
        let server = try await TCPServer.bind(group: group, configuration: configuration, framing: LineFraming(lineTimeout: nil)) { _ in handler }
        let peers = 32
        let clients = try (0..<peers).map { _ in try LineClient(port: server.port, timeoutSeconds: 30, receiveBufferBytes: 4096) }
        defer { clients.forEach { $0.abort() } }
        let senders = clients.map { sendFromThread($0, lines: 1_000, length: 1_000) }
        defer { senders.forEach { $0.stop() } }
        // Every connection ends up not reading: over its high watermark, or over the floor
        // while the process is over its budget.
        try await pollUntil(seconds: 20) {
            let connections = handler.connections.withSanitizedLock { $0 }
            guard connections.count == peers, let loop = connections.first?.loop else { return false }
            return await loop.submit { connections.allSatisfy(\.isSocketReadingPaused) }
        }
        let held = server.bufferedBytes
        #expect(held > budget)
        // Each connection past the budget kept at most the floor's worth of echoes that the
        // kernel did not take, its buffer rounded up: under 32 KiB on average (about 26 KiB
        // here). Reading whole 64 KiB reads past the budget leaves about 48 KiB each.
        #expect(held <= budget + peers * (32 << 10), "\(peers) connections hold \(held) bytes over a budget of \(budget)")
    }

    @Test func anUnsentLimitOutOfRangeIsRefused() throws {
        #expect(throws: SluiceError.self) { try TCPConfiguration(socketUnsentLimit: 512).validate() }
        #expect(throws: SluiceError.self) { try TCPConfiguration(socketUnsentLimit: 128 << 20).validate() }
        try TCPConfiguration(socketUnsentLimit: nil).validate()
        try TCPConfiguration(socketUnsentLimit: 1024).validate()
    }
}
