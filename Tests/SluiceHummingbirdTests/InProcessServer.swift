#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import SluiceLibevent
import Synchronization

/// Serves a router in process: each request is built as Hummingbird's server builds it and handed
/// to the router's responder on the caller's task; the response body is collected as written.
enum InProcessServer {
    /// Runs `body` with a client whose requests go straight to `router`'s responder.
    static func serve(_ router: Router<BasicRequestContext>, _ body: @Sendable (Client) async throws -> Void) async throws {
        let responder = router.buildResponder()
        // One channel stands for the connection of every request; closed at the end, so that it,
        // its pipeline and its testing event loop are freed.
        let channel = NIOAsyncTestingChannel()
        let logger = Logger(label: "sluice.tests.router")
        let client = Client(port: nil) { sending in
            var fields = sending.headers
            if let content = sending.body { fields[.contentLength] = String(content.utf8.count) }
            let request = Request(
                head: HTTPRequest(method: sending.method, scheme: "http", authority: "localhost", path: sending.uri, headerFields: fields),
                body: RequestBody(buffer: ByteBuffer(string: sending.body ?? "")))
            let context = BasicRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
            let response: Response
            do {
                // The router's responder turns an `HTTPResponseError` into its response itself.
                response = try await responder.respond(to: request, context: context)
            } catch {
                // Any other error: the 500 Hummingbird's server answers.
                response = Response(status: .internalServerError)
            }
            let collected = CollectedBody()
            try await response.body.write(collected)
            return Sent(status: response.status, headers: response.headers, body: collected.text)
        }
        do {
            try await body(client)
        } catch {
            try? await channel.close()
            throw error
        }
        try await channel.close()
    }
}

/// A response body writer that keeps what is written.
private struct CollectedBody: ResponseBodyWriter {
    private let bytes = Box()

    var text: String { bytes.buffer.withSanitizedLock { String(buffer: $0) } }

    func write(_ buffer: ByteBuffer) async throws {
        bytes.buffer.withSanitizedLock { _ = $0.writeImmutableBuffer(buffer) }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}

    private final class Box: Sendable {
        let buffer = Mutex(ByteBuffer())
    }
}
#endif
