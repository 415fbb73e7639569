#if Hummingbird
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Sluice
import SluiceHummingbird
import SluiceLibevent
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// Both ways HummingbirdTesting runs an app: through the router in process, and on a live
/// server over a socket.
let testModes: [TestingSetup] = [.router, .live]

/// A gate on one loop with a manual clock, for the middleware under test.
struct Fixture: Sendable {
    let group: SluiceLoopGroup
    let clock: ManualGateClock
    let gate: Gate

    init(_ plugins: PluginRegistry, clock: ManualGateClock = ManualGateClock()) throws {
        group = try SluiceLoopGroup(loopCount: 1)
        self.clock = clock
        gate = try Gate(group: group, plugins: plugins, clock: { _ in clock })
    }

    /// Runs `body` against an app serving `router` in `mode`, then shuts the gate down.
    func test(_ router: Router<BasicRequestContext>, _ mode: TestingSetup, _ body: @Sendable (Client) async throws -> Void) async throws {
        let app = Application(router: router)
        do {
            try await app.test(mode) { client in try await body(Client(base: client)) }
        } catch {
            await close()
            throw error
        }
        await close()
    }

    private func close() async {
        await gate.shutdown()
        group.shutdownGracefully()
    }
}

/// A response, as the tests read it.
struct Sent: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: String
}

/// The test client, with one more way to send: on a connection of its own.
struct Client: Sendable {
    let base: any TestClientProtocol

    /// Sends a request on the tester's client.
    func send(_ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:], body: String? = nil) async throws -> Sent {
        let response = try await base.executeRequest(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
        return Sent(status: response.status, headers: response.headers, body: String(buffer: response.body))
    }

    /// Sends a request that must not queue behind one in flight: on a live server, on a
    /// connection of its own (the tester's client has one connection); through the router,
    /// as ``send(_:_:headers:body:)``.
    func sendAlone(_ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:], body: String? = nil) async throws -> Sent {
        guard let port = base.port else { return try await send(method, uri, headers: headers, body: body) }
        let client = TestClient(host: "localhost", port: port, configuration: .init(timeout: .seconds(20)))
        client.connect()
        do {
            let response = try await client.execute(
                TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body.map { ByteBuffer(string: $0) }))
            try await client.shutdown()
            return Sent(status: response.status, headers: response.headers, body: response.body.map { String(buffer: $0) } ?? "")
        } catch {
            try? await client.shutdown()
            throw error
        }
    }
}

/// A signal a handler waits on: the handler reports that it entered, the test opens it.
final class Latch: Sendable {
    private let latch = TestLatch()
    /// One element each time a handler enters ``wait()``.
    let entries: AsyncStream<Void>
    private let entered: AsyncStream<Void>.Continuation

    init() {
        (entries, entered) = AsyncStream.makeStream()
    }

    /// Reports the entry, then returns once the latch is open.
    func wait() async {
        entered.yield(())
        await latch.wait()
    }

    /// Lets every waiting and later handler through.
    func open() { latch.open() }
}

/// Waits until `condition` holds, yielding between checks; fails after 10 seconds (times
/// ``deadlineScale``).
func eventually(_ what: String, _ condition: () async -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10 * deadlineScale)
    while !(await condition()) {
        guard ContinuousClock.now < deadline else {
            Issue.record("timed out waiting until \(what)")
            throw CancellationError()
        }
        await Task.yield()
    }
}

/// The `Authorization` field of user `name`.
func user(_ name: String, idempotencyKey: String? = nil) -> HTTPFields {
    var fields = HTTPFields()
    fields[.authorization] = "Bearer \(name)"
    if let idempotencyKey { fields[.idempotencyKeyForTests] = idempotencyKey }
    return fields
}

extension HTTPField.Name {
    /// `Idempotency-Key`, spelt out here so that the tests do not read it from the code under test.
    static var idempotencyKeyForTests: HTTPField.Name { forTests("Idempotency-Key") }
    /// `RateLimit`.
    static var rateLimitForTests: HTTPField.Name { forTests("RateLimit") }
    /// `RateLimit-Policy`.
    static var rateLimitPolicyForTests: HTTPField.Name { forTests("RateLimit-Policy") }
    /// `Idempotent-Replayed`.
    static var idempotentReplayedForTests: HTTPField.Name { forTests("Idempotent-Replayed") }

    static func forTests(_ name: String) -> HTTPField.Name {
        guard let name = HTTPField.Name(name) else { preconditionFailure("a valid field name") }
        return name
    }
}
#endif
