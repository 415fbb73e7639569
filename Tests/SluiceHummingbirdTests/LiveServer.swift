#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SluiceLibevent
import SluiceTestSupport
import Synchronization
import Testing

/// Serves a router on a Hummingbird server bound to a loopback port the kernel picks, and reads
/// it with ``HTTPTestClient``, a real HTTP/1.1 client over a keep-alive connection.
enum LiveServer {
    /// Runs `body` with a client on one connection to the running server, then shuts the server
    /// down gracefully.
    static func serve(_ router: Router<BasicRequestContext>, _ body: @Sendable (Client) async throws -> Void) async throws {
        let logger = Logger(label: "sluice.tests.live")
        let (ports, announce) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                announce.yield(channel.localAddress?.port ?? 0)
                announce.finish()
            },
            logger: logger)
        var configuration = ServiceGroupConfiguration(services: [app], gracefulShutdownSignals: [], logger: logger)
        // A graceful shutdown waits for every request being handled: one that never ends (a
        // route a failed test left parked) turns it into cancellation, and a cancellation that
        // does not end either stops the process with a message, instead of holding the run.
        let gracefulLimit = Duration.seconds(10 * deadlineScale)
        configuration.maximumGracefulShutdownDuration = gracefulLimit
        configuration.maximumCancellationDuration = gracefulLimit
        let services = ServiceGroup(configuration: configuration)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                // A server that fails to start ends the wait for its port.
                defer { announce.finish() }
                try await services.run()
            }
            do {
                guard let port = await ports.first(where: { _ in true }), port > 0 else {
                    throw LineClient.Failure(description: "the live server did not start")
                }
                let connection = try HTTPTestClient(port: port, timeoutSeconds: 20)
                let inUse = Mutex(false)
                try await body(Client(port: port) { sending in
                    let wasInUse = inUse.withSanitizedLock { inUse in
                        defer { inUse = true }
                        return inUse
                    }
                    #expect(!wasInUse, "one request at a time on the client's connection: sendAlone sends another alongside")
                    defer { inUse.withSanitizedLock { $0 = false } }
                    return try await exchange(sending, on: connection)
                })
            } catch {
                await services.triggerGracefulShutdown()
                throw error
            }
            let shutdownStarted = ContinuousClock.now
            await services.triggerGracefulShutdown()
            try await tasks.waitForAll()
            if ContinuousClock.now - shutdownStarted >= gracefulLimit {
                Issue.record("the live server's graceful shutdown did not end in \(gracefulLimit): a request was still being handled")
            }
        }
    }

    /// Sends `sending` on `connection` and reads the response.
    static func exchange(_ sending: Sending, on connection: HTTPTestClient) async throws -> Sent {
        try connection.send(
            sending.method.rawValue, sending.uri, fields: sending.headers.map { ($0.name.rawName, $0.value) }, body: sending.body ?? "")
        let response = try await connection.readResponse(toHead: sending.method == .head)
        var headers = HTTPFields()
        for (name, value) in response.fields {
            guard let fieldName = HTTPField.Name(name) else {
                throw LineClient.Failure(description: "a response field name HTTP does not allow: \(name)")
            }
            headers.append(HTTPField(name: fieldName, value: value))
        }
        return Sent(status: HTTPResponse.Status(code: response.status, reasonPhrase: response.reason), headers: headers, body: response.text)
    }
}
#endif
