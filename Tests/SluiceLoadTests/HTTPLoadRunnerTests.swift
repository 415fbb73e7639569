import ArgumentParser
import SluiceLoadCore
import SluiceTestSupport
import Testing

@Suite("sluice-load --http against an in-test HTTP server", .serialized)
struct HTTPLoadRunnerTests {
    /// An HTTP run against `port` (see `LoadRunnerTests.configuration` for the drain timeout).
    static func run(port: Int, drainTimeout: String = "10s", _ arguments: [String]) async throws -> LoadResult {
        let configuration = try LoadOptions.parse(["--http", "--port", "\(port)", "--drain-timeout", drainTimeout] + arguments)
            .configuration()
        return try await LoadRunner.run(configuration)
    }

    /// The names of the checks that failed.
    static func failed(_ result: LoadResult) -> [String] {
        result.checks.filter { !$0.passed }.map(\.name)
    }

    @Test("a correct server passes every check; duplicates are replayed, charges = pairs answered 201")
    func correctServer() async throws {
        try await withFakeHTTPServer(.none) { port in
            let result = try await Self.run(
                port: port,
                ["--connections", "6", "--requests", "2000", "--mix", "echo=40,tap=20,pay=30,search=10",
                 "--dup-ratio", "0.5", "--keys", "50", "--loops", "2"])
            #expect(result.passed, "\(result.report)")
            #expect(result.stats.totalSent == 2000)
            #expect(result.stats.totalReplies == 2000)
            #expect(result.ledger.duplicatesSent > 0)
            #expect(result.stats.count(.pay, .okReplayed) == result.ledger.duplicatesSent)
            let charged = try #require(result.outcome.statsAfter?.payments) - (try #require(result.outcome.statsBefore?.payments))
            #expect(charged == result.ledger.uniquePairsSent)
            #expect(result.outcome.httpStatuses["201"] == result.stats.replies(to: .pay))
            #expect(result.stats.count(.search, .ok) == result.stats.sent(.search))
            #expect(result.checks.map(\.name).contains("PAY charges (/metrics) = (key, Idempotency-Key) pairs answered 201"))
            #expect(result.report.contains("HTTP statuses: 200="))
        }
    }

    @Test("pipelining: --depth 4 keeps four requests on each connection's wire, matched in order")
    func pipelined() async throws {
        try await withFakeHTTPServer(.none) { port in
            let result = try await Self.run(
                port: port, ["--connections", "2", "--depth", "4", "--requests", "1000", "--mix", "echo=1,pay=1,search=1", "--dup-ratio", "0.3"])
            #expect(result.passed, "\(result.report)")
            #expect(result.stats.totalReplies == 1000)
        }
    }

    @Test("responses written a few bytes at a time parse the same")
    func trickle() async throws {
        try await withFakeHTTPServer(.trickle) { port in
            let result = try await Self.run(port: port, ["--connections", "2", "--requests", "200", "--mix", "echo=1,tap=1,pay=1,search=1"])
            #expect(result.passed, "\(result.report)")
        }
    }

    @Test("a server that charges every duplicate fails the payment check, and only it")
    func doubleCharging() async throws {
        try await withFakeHTTPServer(.chargeEveryPay) { port in
            let result = try await Self.run(
                port: port, ["--connections", "4", "--requests", "600", "--mix", "pay=1", "--dup-ratio", "0.5"])
            #expect(Self.failed(result) == ["PAY charges (/metrics) = (key, Idempotency-Key) pairs answered 201"])
        }
    }

    @Test("Connection: close: the client reconnects and goes on; every request is answered")
    func connectionClose() async throws {
        try await withFakeHTTPServer(.closeEvery(7)) { port in
            let result = try await Self.run(port: port, ["--connections", "3", "--requests", "300", "--mix", "echo=1,pay=1", "--dup-ratio", "0.3"])
            #expect(result.passed, "\(result.report)")
            #expect(result.outcome.reconnects > 0)
            #expect(result.stats.totalReplies == 300)
        }
    }

    @Test("Connection: close with requests pipelined behind it: those are missing, the run fails")
    func connectionCloseWhilePipelining() async throws {
        try await withFakeHTTPServer(.closeEvery(5)) { port in
            let result = try await Self.run(port: port, ["--connections", "1", "--depth", "3", "--requests", "100", "--mix", "echo=1"])
            #expect(!result.passed)
            #expect(result.outcome.missingReplies > 0)
            #expect(Self.failed(result) == ["every request got exactly one reply"], "\(result.report)")
        }
    }

    @Test("a malformed response fails the run: the connection is lost with its requests")
    func malformed() async throws {
        try await withFakeHTTPServer(.malformedResponse(20)) { port in
            let result = try await Self.run(port: port, ["--connections", "2", "--requests", "100", "--mix", "echo=1"])
            #expect(!result.passed)
            #expect(result.outcome.unexpectedReplies == 1)
            #expect(result.outcome.connectionsClosedEarly == 1)
            #expect(result.samples.contains { $0.contains("malformed response") })
        }
    }

    @Test("a connection closed with a request outstanding fails the run")
    func hangUp() async throws {
        try await withFakeHTTPServer(.hangUp(30)) { port in
            let result = try await Self.run(port: port, ["--connections", "2", "--requests", "100", "--mix", "echo=1"])
            #expect(!result.passed)
            #expect(result.outcome.connectionsClosedEarly == 1)
            #expect(result.outcome.missingReplies == 1)
            #expect(Self.failed(result) == ["every request got exactly one reply", "no connection lost with requests outstanding"])
        }
    }

    @Test("500 fails 'no unexpected error status'; 503 busy is counted apart and fails nothing")
    func errorStatuses() async throws {
        try await withFakeHTTPServer(.errorOnTap) { port in
            let result = try await Self.run(port: port, ["--connections", "2", "--requests", "100", "--mix", "echo=1,tap=1"])
            #expect(Self.failed(result) == ["no unexpected error status"])
            #expect(result.outcome.errorReplies == result.stats.sent(.tap))
        }
        try await withFakeHTTPServer(.busyOnTap) { port in
            let result = try await Self.run(port: port, ["--connections", "2", "--requests", "100", "--mix", "echo=1,tap=1"])
            #expect(result.passed, "\(result.report)")
            #expect(result.outcome.busyReplies == result.stats.sent(.tap))
            #expect(result.stats.count(.tap, .busy) == result.stats.sent(.tap))
        }
    }

    @Test("open loop over HTTP sends at the requested rate, one request at a time per connection")
    func openLoop() async throws {
        try await withFakeHTTPServer(.none) { port in
            let result = try await Self.run(port: port, ["--connections", "4", "--rate", "2000", "--duration", "500ms", "--mix", "echo=1"])
            #expect(result.passed, "\(result.report)")
            // 2000/s × 0.5 s: one request per intended instant before the deadline, each connection
            // on its own 2 ms grid (250 each), however late the loops ran.
            #expect(result.stats.totalSent == 1000, "sent \(result.stats.totalSent)")
        }
    }

    @Test("nothing listening: the run fails with an error, not a hang")
    func refused() async throws {
        try await withRefusingLoopbackPort { port in
            await #expect(throws: LoadError.self) { try await Self.run(port: port, ["--requests", "10"]) }
        }
    }
}

@Suite("--http options")
struct HTTPOptionTests {
    @Test("--http: port 8080 and depth 1 unless given")
    func defaults() throws {
        let configuration = try LoadOptions.parse(["--http"]).configuration()
        #expect(configuration.http)
        #expect(configuration.port == 8080)
        #expect(configuration.depth == 1)
        let explicit = try LoadOptions.parse(["--http", "--port", "9090", "--depth", "3"]).configuration()
        #expect(explicit.port == 9090)
        #expect(explicit.depth == 3)
        let line = try LoadOptions.parse([]).configuration()
        #expect(!line.http)
        #expect(line.port == 7070)
        #expect(line.depth == 8)
    }

    @Test("--http excludes the echo baselines' modes", arguments: [["--http", "--raw-echo"], ["--http", "--verbatim-echo"]])
    func refused(arguments: [String]) throws {
        let options = try LoadOptions.parse(arguments)
        #expect(throws: LoadError.self) { try options.configuration() }
    }
}
