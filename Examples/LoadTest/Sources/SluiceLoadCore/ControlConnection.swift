import SluiceCore
import SluiceLibevent
import SluiceLineProtocol

/// A connection for one request at a time (the `STATS` probes around a run).
final class ControlConnection: Sendable {
    private let connection: TCPConnection
    private let handler: ControlHandler

    private init(connection: TCPConnection, handler: ControlHandler) {
        self.connection = connection
        self.handler = handler
    }

    /// Connects to the server on `loop`.
    static func connect(host: String, port: Int, on loop: SluiceLoop) async throws(SluiceError) -> ControlConnection {
        let handler = ControlHandler()
        let connection = try await TCPClient.connect(host: host, port: port, on: loop) { _ in handler }
        return ControlConnection(connection: connection, handler: handler)
    }

    /// Sends `line` (LF added) and returns the next line received, or `nil` after `timeout` or
    /// when the connection closes.
    func request(_ line: String, timeout: Duration = .seconds(5)) async -> String? {
        let loop = connection.loop
        let handler = handler
        let connection = connection
        return await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            loop.execute {
                handler.waiting = continuation
                let timer = loop.schedule(after: timeout) { handler.deliver(nil) }
                handler.timer = timer
                connection.write(line + "\n")
            }
        }
    }

    /// `STATS` as counters, or `nil` when the server does not answer it with `OK`.
    func stats() async -> ServerStats? {
        guard let text = await request("0 STATS"), let reply = ReplyLine(text), reply.kind == .ok else { return nil }
        return ServerStats(details: reply.details)
    }

    func close() {
        connection.close()
    }
}

/// Hands the next line to whoever waits for it.
private final class ControlHandler: TCPLineHandler, @unchecked Sendable {
    // @unchecked Sendable: `waiting` and `timer` are read and written on the connection's loop
    // thread only (the handler callbacks and the closure `request` enqueues there).
    var waiting: CheckedContinuation<String?, Never>?
    var timer: LoopTimer?

    func deliver(_ line: String?) {
        timer?.cancel()
        timer = nil
        waiting?.resume(returning: line)
        waiting = nil
    }

    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        deliver(String(decoding: line, as: UTF8.self))
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        deliver(nil)
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        deliver(nil)
    }
}
