#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore
import Sluice
import SluiceHummingbird
import SluiceLibevent
import SluicePluginTesting
import SluiceTestSupport
import Synchronization
import Testing

/// Both ways a test serves its app: through the router in process, and on a live server over a
/// socket.
let testModes = ServingMode.allCases

/// A gate on one loop with a manual clock, for the middleware under test.
struct Fixture: Sendable {
    let group: SluiceLoopGroup
    let clock: ManualGateClock
    let gate: Gate

    init(_ plugins: PluginRegistry, clock: ManualGateClock = ManualGateClock()) throws {
        group = try SluiceLoopGroup(loopCount: 1)
        self.clock = clock
        gate = try Gate(group: group, plugins: plugins, clock: clock.clock(for:))
    }

    /// Runs `body` against an app serving `router` in `mode`, then shuts the gate down.
    func test(_ router: Router<BasicRequestContext>, _ mode: ServingMode, _ body: @Sendable (Client) async throws -> Void) async throws {
        do {
            switch mode {
            case .router: try await InProcessServer.serve(router, body)
            case .live: try await LiveServer.serve(router, body)
            }
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

/// What a test sends: a method, a target, header fields and a body.
struct Sending: Sendable {
    let method: HTTPRequest.Method
    let uri: String
    let headers: HTTPFields
    let body: String?
}

/// The test client of one served app.
struct Client: Sendable {
    /// The live server's port; nil through the router.
    let port: Int?
    /// Sends one request on the client's connection and reads its response.
    let exchange: @Sendable (Sending) async throws -> Sent

    /// Sends a request on the client's one connection (live), or through the router. One
    /// request at a time: a request that must not queue behind one in flight is sent with
    /// ``sendAlone(_:_:headers:body:)``.
    func send(_ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:], body: String? = nil) async throws -> Sent {
        try await exchange(Sending(method: method, uri: uri, headers: headers, body: body))
    }

    /// Sends a request that must not queue behind one in flight: on a live server, on a
    /// connection of its own; through the router, as ``send(_:_:headers:body:)``.
    func sendAlone(_ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields = [:], body: String? = nil) async throws -> Sent {
        guard let port else { return try await send(method, uri, headers: headers, body: body) }
        let connection = try HTTPTestClient(port: port, timeoutSeconds: 20)
        return try await LiveServer.exchange(Sending(method: method, uri: uri, headers: headers, body: body), on: connection)
    }
}

/// A signal a handler waits on: the handler reports that it entered, the test opens it.
final class Latch: Sendable {
    private let latch = TestLatch()
    /// Handlers that have entered ``wait()``.
    private let entered = Atomic(0)

    /// Reports the entry, then returns once the latch is open.
    func wait() async {
        entered.add(1, ordering: .releasing)
        await latch.wait()
    }

    /// Returns once `count` handlers have entered ``wait()``; fails after the deadline of
    /// ``eventually(_:_:)`` (a request that never reached its handler fails the test instead
    /// of holding it).
    func waitForEntries(_ count: Int = 1) async throws {
        try await eventually("\(count) request(s) entered the route") { self.entered.load(ordering: .acquiring) >= count }
    }

    /// Lets every waiting and later handler through.
    func open() { latch.open() }
}

/// Waits until `condition` holds, polling it with ``pollUntil(seconds:_:)`` (a pause between
/// tries, so that the wait does not take the CPU from what it waits for); records an issue
/// naming `what` and throws after 10 seconds (times ``deadlineScale``).
func eventually(_ what: String, _ condition: () async -> Bool) async throws {
    do {
        try await pollUntil(seconds: 10) { await condition() }
    } catch let timeout as PollTimeout {
        Issue.record("timed out waiting until \(what): \(timeout)")
        throw timeout
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
