import SluiceCore
import SluiceLibevent

/// One HTTP request on a connection of its own, awaited: the `GET /metrics` probes around an
/// HTTP run (the HTTP mode's `STATS`). A connection for each probe, as in the line mode: one kept
/// open through a long run could be closed by the server's idle timeout before the last probe.
final class HTTPProbe: HTTPClientHandler, @unchecked Sendable {
    // @unchecked Sendable: created on the loop and touched there only (the transport's
    // callbacks and the timeout timer); the reference crosses threads only to get there.

    /// What a probe got.
    enum Outcome: Sendable, Hashable {
        /// A response: its status and its body as text.
        case answered(status: Int, body: String)
        /// The connection could not be opened: why.
        case unreachable(String)
        /// No response on the connection: why.
        case failed(String)
    }

    private let request: [UInt8]
    private var transport: HTTPClientConnection?
    private var timer: LoopTimer?
    private var continuation: CheckedContinuation<Outcome, Never>?

    private init(request: [UInt8], continuation: CheckedContinuation<Outcome, Never>) {
        self.request = request
        self.continuation = continuation
    }

    /// Sends `request` to `host:port` from `loop` and returns the response, or why there is
    /// none (cannot connect; closed, malformed, or no answer within `timeout`).
    static func send(
        _ request: HTTPRequest, host: String, port: Int, on loop: SluiceLoop, timeout: Duration = .seconds(5)
    ) async -> Outcome {
        var encoder = HTTPRequestEncoder(host: host, port: port)
        encoder.encode(request)
        let bytes = encoder.bytes
        return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            loop.execute {
                let probe = HTTPProbe(request: bytes, continuation: continuation)
                probe.timer = loop.schedule(after: timeout) { probe.deliver(.failed("no response within \(timeout)")) }
                probe.transport = HTTPClientConnection.open(
                    host: host, port: port, on: loop, parser: HTTPLoadConnection.parser, timeout: timeout, handler: probe)
                if probe.transport == nil { probe.deliver(.failed("cannot create a bufferevent")) }
            }
        }
    }

    /// Hands the outcome over (once) and closes the connection.
    private func deliver(_ outcome: Outcome) {
        timer?.cancel()
        timer = nil
        continuation?.resume(returning: outcome)
        continuation = nil
        let transport = self.transport
        self.transport = nil
        transport?.close()
    }

    func httpConnectionOpened(_ connection: HTTPClientConnection) {
        request.withUnsafeBytes { _ = connection.write($0) }
    }

    func httpConnection(_ connection: HTTPClientConnection, received response: HTTPResponseView) {
        deliver(.answered(status: response.status, body: response.bodyText))
    }

    func httpConnectionClosed(_ connection: HTTPClientConnection, reason: HTTPClientConnection.CloseReason) {
        if case .connectFailed(let why) = reason {
            deliver(.unreachable(why))
        } else {
            deliver(.failed("\(reason)"))
        }
    }
}
