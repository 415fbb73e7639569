import SluiceCore
import SluiceLibevent
import SluiceLineProtocol
import Synchronization
import SluiceTestSupport
import Testing

/// Server side for these tests: per line, writes what the line asks for.
/// `later <text>` replies from a loop job after the read batch; `close-after <text>` replies and
/// then closes after flushing, inside the batch; anything else is echoed at once.
private final class ScriptedHandler: TCPLineHandler {
    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        let text = String(decoding: line, as: UTF8.self)
        if text.hasPrefix("later ") {
            let reply = String(text.dropFirst(6)) + "\n"
            connection.loop.execute { connection.write(reply) }
        } else if text.hasPrefix("close-after ") {
            connection.write(String(text.dropFirst(12)) + "\n")
            connection.closeAfterFlush()
        } else {
            connection.write(text + "\n")
        }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        connection.write("- ERR line-too-long\n")
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}

/// Client side: collects lines and close reasons, from the loop thread.
private final class CollectingHandler: TCPLineHandler, Sendable {
    let lines = Mutex<[String]>([])
    let closed = Mutex<TCPConnection.CloseReason?>(nil)

    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        let text = String(decoding: line, as: UTF8.self)
        lines.withSanitizedLock { $0.append(text) }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        lines.withSanitizedLock { $0.append("<overlong>") }
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        closed.withSanitizedLock { $0 = reason }
    }

    /// Waits until `count` lines arrived; returns them. A timeout names what did arrive.
    func waitForLines(_ count: Int) async throws -> [String] {
        try await naming { try await pollUntil { lines.withSanitizedLock { $0.count >= count } } }
        return lines.withSanitizedLock { $0 }
    }

    /// Waits until the connection closed; returns why. A timeout names what did arrive.
    func waitForClose() async throws -> TCPConnection.CloseReason? {
        try await naming { try await pollUntil { closed.withSanitizedLock { $0 } != nil } }
        return closed.withSanitizedLock { $0 }
    }

    /// Runs `wait`; a timeout it throws is rethrown with the lines and the close seen so far.
    private func naming(_ wait: () async throws -> Void) async throws {
        do {
            try await wait()
        } catch let timeout as PollTimeout {
            let seen = lines.withSanitizedLock { $0 }
            let reason = closed.withSanitizedLock { $0 }
            throw WaitFailure(description: "\(timeout); lines \(seen), close \(reason.map { "\($0)" } ?? "none")")
        }
    }
}

/// A wait of ``CollectingHandler`` that timed out, with what it saw.
private struct WaitFailure: Error, CustomStringConvertible {
    let description: String
}

private func withScriptedServer(_ body: (Int, SluiceLoopGroup) async throws -> Void) async throws {
    let group = try SluiceLoopGroup(loopCount: 2, namePrefix: "client-test")
    do {
        let server = try await TCPServer.bind(group: group, configuration: TCPConfiguration(port: 0)) { _ in
            ScriptedHandler()
        }
        try await body(server.port, group)
    } catch {
        group.shutdownGracefully()
        throw error
    }
    group.shutdownGracefully()
}

@Suite struct TCPClientTests {
    @Test func clientConnectionSendsAndReceivesLines() async throws {
        try await withScriptedServer { port, group in
            let handler = CollectingHandler()
            let connection = try await TCPClient.connect(host: "127.0.0.1", port: port, on: group.loops[1]) { _ in handler }
            #expect(connection.loop === group.loops[1])
            connection.write("one\ntwo\r\n")
            connection.write("three\n")
            #expect(try await handler.waitForLines(3) == ["one", "two", "three"])
            connection.close()
            #expect(try await handler.waitForClose() == .closedLocally)
        }
    }

    @Test func writesDuringAReadBatchAndAfterItKeepTheirOrder() async throws {
        try await withScriptedServer { port, group in
            let handler = CollectingHandler()
            let connection = try await TCPClient.connect(host: "127.0.0.1", port: port, on: group.loops[0]) { _ in handler }
            // One segment: "a" and "c" are written inside the server's read batch, "b" from a
            // loop job after it; "d" arrives in a later batch.
            connection.write("a\nlater b\nc\n")
            #expect(try await handler.waitForLines(3) == ["a", "c", "b"])
            connection.write("d\n")
            #expect(try await handler.waitForLines(4) == ["a", "c", "b", "d"])
        }
    }

    @Test func closeAfterFlushInsideABatchStillSendsWhatWasWritten() async throws {
        try await withScriptedServer { port, group in
            let handler = CollectingHandler()
            let connection = try await TCPClient.connect(host: "127.0.0.1", port: port, on: group.loops[0]) { _ in handler }
            connection.write("first\nclose-after bye\n")
            #expect(try await handler.waitForLines(2) == ["first", "bye"])
            #expect(try await handler.waitForClose() == .endOfStream)
        }
    }

    @Test func refusedAndInvalidAddressesThrow() async throws {
        let group = try SluiceLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully() }
        // A port nothing listens on.
        try await withRefusingLoopbackPort { closedPort in
            await #expect(throws: SluiceError.self) {
                _ = try await TCPClient.connect(host: "127.0.0.1", port: closedPort, on: group.loops[0]) { _ in CollectingHandler() }
            }
        }
        await #expect(throws: SluiceError.self) {
            _ = try await TCPClient.connect(host: "not-an-ip", port: 7070, on: group.loops[0]) { _ in CollectingHandler() }
        }
        await #expect(throws: SluiceError.self) {
            _ = try await TCPClient.connect(host: "127.0.0.1", port: 0, on: group.loops[0]) { _ in CollectingHandler() }
        }
    }
}
