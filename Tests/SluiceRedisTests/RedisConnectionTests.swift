import Logging
import Sluice
import SluiceLibevent
import SluiceRedis
import SluiceTestSupport
import Synchronization
import Testing

/// The availability changes a connection reported, in order.
private final class AvailabilityLog: Sendable {
    let changes = Mutex<[Bool]>([])

    var values: [Bool] { changes.withSanitizedLock { $0 } }
}

/// Runs `body` with a started connection to `server` (waited until usable) on a loop of its
/// own; closes both afterwards. The default call timeout (5 s) is far above what any call here
/// takes under a sanitizer on a busy machine; tests of timeouts pass their own.
private func withConnection(
    to server: RedisServerProcess, database: Int = 0, timeout: Duration = .seconds(5),
    _ body: (RedisConnection, AvailabilityLog) async throws -> Void
) async throws {
    let loop = try SluiceLoop(name: "redis-test")
    let log = AvailabilityLog()
    let endpoint = try RedisEndpoint(url: server.url(database: database))
    let connection = RedisConnection(endpoint: endpoint, loop: loop, timeout: timeout, logger: Logger(label: "redis-test"))
    connection.onAvailabilityChange = { available in log.changes.withSanitizedLock { $0.append(available) } }
    connection.start()
    do {
        try await pollUntil(seconds: 10) { await isConnected(connection) }
        try await body(connection, log)
    } catch {
        connection.close()
        loop.shutdownGracefully()
        throw error
    }
    connection.close()
    loop.shutdownGracefully()
}

private func isConnected(_ connection: RedisConnection) async -> Bool {
    await connection.loop.submit { connection.isConnected }
}

/// Sends `arguments` on the loop and returns the outcome if the completion ran before `send`
/// returned, else `nil`.
private func sendExpectingAnImmediateAnswer(
    _ connection: RedisConnection, _ arguments: [String]
) async -> Result<RedisReply, RedisCallError>? {
    await connection.loop.submit {
        let answer = Mutex<Result<RedisReply, RedisCallError>?>(nil)
        connection.send(arguments) { result in answer.withSanitizedLock { $0 = result } }
        return answer.withSanitizedLock { $0 }
    }
}

private func code(_ result: Result<RedisReply, RedisCallError>?) -> RedisCallError.Code? {
    guard case .failure(let error) = result else { return nil }
    return error.code
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite(
    .serialized,
    .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed: scripts/install-deps.sh installs it"))
struct RedisConnectionTests {
    @Test func connectsAndAnswersPingSetAndGet() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        try await withConnection(to: server) { connection, log in
            #expect(await connection.call(["PING"]) == .success(.status("PONG")))
            #expect(await connection.call(["SET", "greeting", "hello"]) == .success(.status("OK")))
            #expect(await connection.call(["GET", "greeting"]) == .success(.string(bytes("hello"))))
            #expect(try await connection.call(["GET", "greeting"]).get().text == "hello")
            #expect(await connection.call(["GET", "missing"]) == .success(.null))
            #expect(await connection.call(["INCRBY", "n", "41"]) == .success(.integer(41)))
            // Binary-safe arguments and replies, empty ones included.
            let binary: [UInt8] = [0, 1, 13, 10, 255]
            #expect(await connection.call([bytes("SET"), bytes("binary"), binary]) == .success(.status("OK")))
            #expect(await connection.call([bytes("GET"), bytes("binary")]) == .success(.string(binary)))
            #expect(await connection.call([bytes("SET"), bytes("empty"), []]) == .success(.status("OK")))
            #expect(await connection.call(["GET", "empty"]) == .success(.string([])))
            #expect(await connection.call(["RPUSH", "list", "a", "b"]) == .success(.integer(2)))
            #expect(
                await connection.call(["LRANGE", "list", "0", "-1"])
                    == .success(.array([.string(bytes("a")), .string(bytes("b"))])))
            // An error reply is a reply.
            let wrong = try await connection.call(["INCR", "greeting"]).get()
            #expect(wrong.isError)
            #expect(wrong.errorMessage?.hasPrefix("ERR") == true)
            // Commands that would unpair replies from calls, or move the connection to another
            // database, are refused before they are sent.
            #expect(code(await sendExpectingAnImmediateAnswer(connection, ["SUBSCRIBE", "news"])) == .invalidCommand)
            #expect(code(await sendExpectingAnImmediateAnswer(connection, ["select", "2"])) == .invalidCommand)
            #expect(code(await sendExpectingAnImmediateAnswer(connection, ["CLIENT", "REPLY", "OFF"])) == .invalidCommand)
            #expect(code(await sendExpectingAnImmediateAnswer(connection, [])) == .invalidCommand)
            #expect(await connection.call(["PING"]) == .success(.status("PONG")))
            #expect(log.values == [true])
        }
    }

    @Test func aThousandPipelinedIncrsAreAnsweredInOrderOnTheLoop() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        try await withConnection(to: server) { connection, _ in
            let replies = Mutex<[Int]>([])
            let offLoop = Atomic<Int>(0)
            let loop = connection.loop
            await loop.submit {
                for _ in 0..<1_000 {
                    connection.send(["INCR", "counter"]) { result in
                        if !loop.inEventLoop { offLoop.add(1, ordering: .relaxed) }
                        replies.withSanitizedLock { $0.append((try? result.get())?.int ?? -1) }
                    }
                }
            }
            try await pollUntil(seconds: 10) { replies.withSanitizedLock { $0.count } == 1_000 }
            #expect(replies.withSanitizedLock { $0 } == Array(1...1_000))
            #expect(offLoop.load(ordering: .relaxed) == 0)
            #expect(try await server.command(["GET", "counter"]) == "1000")
        }
    }

    @Test func theDatabaseInTheURLIsSelectedBeforeAnyCall() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        try await withConnection(to: server, database: 3) { connection, _ in
            #expect(await connection.call(["SET", "where", "three"]) == .success(.status("OK")))
            let inThree = try await server.command(["GET", "where"], database: 3)
            let inZero = try await server.command(["GET", "where"], database: 0)
            #expect(inThree == "three")
            #expect(inZero == nil)
        }
    }

    @Test func aCallToAKilledServerFailsUnavailableAtOnce() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        try await withConnection(to: server, timeout: .seconds(5)) { connection, log in
            // A call the server holds (every client is paused) when it dies: lost before its
            // reply, it fails `.unavailable`, not `.timeout` (no wall-clock bound is checked: a
            // loaded machine may resume this test late).
            _ = try await server.command(["CLIENT", "PAUSE", "10000"])
            let held = Mutex<Result<RedisReply, RedisCallError>?>(nil)
            await connection.loop.submit {
                connection.send(["GET", "k"]) { result in held.withSanitizedLock { $0 = result } }
            }
            server.kill()
            try await pollUntil(seconds: 10) { held.withSanitizedLock { $0 } != nil }
            #expect(code(held.withSanitizedLock { $0 }) == .unavailable)

            try await pollUntil(seconds: 10) { await !isConnected(connection) }
            // Down: a call fails before `send` returns, without waiting for a reconnect.
            let immediate = await sendExpectingAnImmediateAnswer(connection, ["PING"])
            #expect(code(immediate) == .unavailable)
            #expect(log.values == [true, false])
        }
    }

    @Test func theConnectionComesBackByItselfWhenTheServerRestartsWithItsData() async throws {
        let server = try await RedisServerProcess.start(persistent: true)
        defer { server.stop() }
        try await withConnection(to: server) { connection, log in
            #expect(await connection.call(["SET", "durable", "yes"]) == .success(.status("OK")))
            server.kill()
            try await pollUntil(seconds: 10) { await !isConnected(connection) }
            // Calls during the outage fail at once.
            #expect(code(await sendExpectingAnImmediateAnswer(connection, ["GET", "durable"])) == .unavailable)

            try await server.restart()
            try await pollUntil(seconds: 10) { await isConnected(connection) }
            let durable = await connection.call(["GET", "durable"])
            #expect(durable == .success(.string(bytes("yes"))), "\(durable)")
            #expect(log.values == [true, false, true])
        }
    }

    @Test func aSlowServerTimesACallOutOnceAndLaterCallsWork() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        try await withConnection(to: server, timeout: .seconds(1)) { connection, log in
            #expect(connection.stallLimit == .seconds(5))
            _ = try await server.command(["SET", "k", "v"])
            // The server is stopped (SIGSTOP) until the call has timed out: the stall lasts as
            // long as the test needs, however slow the machine. It must stay under the stall
            // limit (5 s), or the connection is dropped: the completion that receives the 1 s
            // timeout resumes it at once, on the loop, whenever this task runs again.
            server.pause()
            let outcomes = Mutex<[Result<RedisReply, RedisCallError>]>([])
            await connection.loop.submit {
                connection.send(["GET", "k"]) { result in
                    outcomes.withSanitizedLock { $0.append(result) }
                    server.resume()
                }
            }
            try await pollUntil(seconds: 10) { !outcomes.withSanitizedLock { $0 }.isEmpty }
            server.resume()
            #expect(code(outcomes.withSanitizedLock { $0.first }) == .timeout)

            // Once the server runs again, calls work again on the same connection; the late
            // reply to the timed-out call (answered before them) is dropped.
            try await pollUntil(seconds: 10) {
                await connection.call(["GET", "k"]) == .success(.string(bytes("v")))
            }
            #expect(outcomes.withSanitizedLock { $0.count } == 1)
            #expect(log.values == [true])
        }
    }

    @Test func aServerStalledPastTheStallLimitIsDroppedAndReconnected() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        try await withConnection(to: server, timeout: .milliseconds(100)) { connection, log in
            #expect(connection.stallLimit == .seconds(1))
            // Stopped (SIGSTOP) until the connection has given up on it: a stall as long as the
            // test needs, not a pause that may end before a slow machine has sent the call.
            server.pause()
            let outcome = Mutex<Result<RedisReply, RedisCallError>?>(nil)
            await connection.loop.submit {
                connection.send(["PING"]) { result in outcome.withSanitizedLock { $0 = result } }
            }
            try await pollUntil(seconds: 10) { await !isConnected(connection) }
            server.resume()
            #expect(code(outcome.withSanitizedLock { $0 }) == .timeout)
            try await pollUntil(seconds: 10) { await connection.call(["PING"]) == .success(.status("PONG")) }
            #expect(log.values == [true, false, true])
        }
    }

    @Test func closeFailsOutstandingCallsAndStopsReconnecting() async throws {
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        let loop = try SluiceLoop(name: "redis-close")
        defer { loop.shutdownGracefully() }
        let connection = RedisConnection(
            endpoint: try RedisEndpoint(url: server.url()), loop: loop, timeout: .seconds(5), logger: Logger(label: "redis-test"))
        connection.start()
        try await pollUntil(seconds: 10) { await isConnected(connection) }
        _ = try await server.command(["CLIENT", "PAUSE", "2000"])
        let outcome = Mutex<Result<RedisReply, RedisCallError>?>(nil)
        await loop.submit {
            connection.send(["PING"]) { result in outcome.withSanitizedLock { $0 = result } }
            connection.close()
        }
        #expect(code(outcome.withSanitizedLock { $0 }) == .unavailable)
        connection.start()
        #expect(await !isConnected(connection))
        #expect(code(await sendExpectingAnImmediateAnswer(connection, ["PING"])) == .unavailable)
    }

    @Test func aServerThatIsNotThereIsRetriedUntilItStarts() async throws {
        // Start a server to learn a port, kill it, connect to the dead port, then start it again.
        let server = try await RedisServerProcess.start()
        defer { server.stop() }
        server.kill()
        let loop = try SluiceLoop(name: "redis-retry")
        defer { loop.shutdownGracefully() }
        let log = AvailabilityLog()
        // The suite's 5 s call timeout: the library's 200 ms one can run out on a busy machine
        // right after the restart, which would be logged as one more outage.
        let connection = RedisConnection(
            endpoint: try RedisEndpoint(url: server.url()), loop: loop, timeout: .seconds(5), logger: Logger(label: "redis-test"))
        connection.onAvailabilityChange = { available in log.changes.withSanitizedLock { $0.append(available) } }
        connection.start()
        #expect(code(await sendExpectingAnImmediateAnswer(connection, ["PING"])) == .unavailable)
        try await server.restart()
        try await pollUntil(seconds: 10) { await isConnected(connection) }
        #expect(await connection.call(["PING"]) == .success(.status("PONG")))
        #expect(log.values == [true])
        connection.close()
    }
}

@Suite struct RedisConnectionURLTests {
    @Test(arguments: [
        ("redis://127.0.0.1", "127.0.0.1", 6379, 0),
        ("redis://localhost:6380", "localhost", 6380, 0),
        ("redis://cache.internal:7000/3", "cache.internal", 7000, 3),
        ("REDIS://host/", "host", 6379, 0),
        ("redis://host:1/0", "host", 1, 0),
        ("redis://host:65535/15", "host", 65535, 15),
        ("redis://[::1]", "::1", 6379, 0),
        ("redis://[::1]:6390/2", "::1", 6390, 2),
    ])
    func goodURLsParse(url: String, host: String, port: Int, database: Int) throws {
        let endpoint = try RedisEndpoint(url: url)
        #expect(endpoint == RedisEndpoint(host: host, port: port, database: database))
        // The description is the URL, every part spelled out, and parses back to the same.
        #expect(try RedisEndpoint(url: endpoint.description) == endpoint)
    }

    @Test func theDescriptionSpellsEveryPartOut() throws {
        #expect(try RedisEndpoint(url: "redis://10.0.0.7").description == "redis://10.0.0.7:6379/0")
        #expect(try RedisEndpoint(url: "redis://[::1]:7000/4").description == "redis://[::1]:7000/4")
    }

    @Test(arguments: [
        ("", "redis://"),
        ("127.0.0.1:6379", "redis://"),
        ("http://host", "scheme"),
        ("rediss://host", "TLS"),
        ("redis://", "host"),
        ("redis://:6379", "host"),
        ("redis://host:", "port"),
        ("redis://host:0", "port"),
        ("redis://host:65536", "port"),
        ("redis://host:abc", "port"),
        ("redis://host:+1", "port"),
        ("redis://host/x", "database"),
        ("redis://host/-1", "database"),
        ("redis://host/1/2", "database"),
        ("redis://host/99999999999", "database"),
        ("redis://user:secret@host", "credentials"),
        ("redis://host?db=1", "query"),
        ("redis://host#top", "fragment"),
        ("redis://[::1", "IPv6"),
        ("redis://[zz::1]:1", "IPv6"),
        ("redis://[::1]6379", "IPv6"),
        ("redis://ho st", "host"),
    ])
    func badURLsNameWhatIsWrong(url: String, mentions: String) {
        do {
            let endpoint = try RedisEndpoint(url: url)
            Issue.record("\(url) parsed as \(endpoint)")
        } catch {
            #expect(error.code == .invalidOption)
            #expect(error.value == url)
            #expect(error.message.contains(mentions), "\(error.message)")
        }
    }
}
