import ArgumentParser
import SluiceLoadCore
import SluiceTestSupport
import Testing

@Suite("sluice-load against an in-test server", .serialized)
struct LoadRunnerTests {
    /// A run against `port`. The drain ends as soon as every reply has come, so the timeout only
    /// bounds a run that lost one: long enough for a machine busy with the other tests, unless
    /// the test waits out a lost reply on purpose.
    static func configuration(port: Int, drainTimeout: String = "10s", _ arguments: [String]) throws -> LoadConfiguration {
        try LoadOptions.parse(["--port", "\(port)", "--drain-timeout", drainTimeout] + arguments).configuration()
    }

    @Test("a correct server passes every check; duplicates are replayed, charges = unique pairs")
    func correctServer() async throws {
        let server = FakeProtocolServer(fault: .none)
        try await withFakeServer(server) { port in
            let configuration = try Self.configuration(
                port: port,
                ["--connections", "6", "--depth", "4", "--requests", "3000", "--mix", "echo=40,tap=20,pay=30,search=10",
                 "--dup-ratio", "0.5", "--keys", "50", "--loops", "2"])
            let result = try await LoadRunner.run(configuration)
            #expect(result.passed, "\(result.report)")
            #expect(result.stats.totalSent == 3000)
            #expect(result.stats.totalReplies == 3000)
            #expect(result.ledger.duplicatesSent > 0)
            #expect(result.ledger.uniquePairsSent > 0)
            #expect(result.stats.count(.pay, .okReplayed) == result.ledger.duplicatesSent)
            let charged = try #require(result.outcome.statsAfter?.payments) - (try #require(result.outcome.statsBefore?.payments))
            #expect(charged == result.ledger.uniquePairsSent)
            #expect(result.checks.count == 6)
            // SEARCH replies come 2 ms late, so replies overtook requests and were matched by id.
            #expect(result.stats.count(.search, .ok) == result.stats.sent(.search))
        }
    }

    @Test("a server that charges every duplicate fails the payment check")
    func doubleCharging() async throws {
        let server = FakeProtocolServer(fault: .chargeEveryPay)
        try await withFakeServer(server) { port in
            let configuration = try Self.configuration(
                port: port, ["--connections", "4", "--depth", "4", "--requests", "800", "--mix", "pay=1", "--dup-ratio", "0.5"])
            let result = try await LoadRunner.run(configuration)
            #expect(!result.passed)
            let failed = result.checks.filter { !$0.passed }.map(\.name)
            #expect(failed == ["PAY charges (STATS) = (key, idem) pairs answered OK"])
        }
    }

    @Test("a lost reply fails 'exactly one reply' after the drain timeout")
    func lostReply() async throws {
        let server = FakeProtocolServer(fault: .dropReply(50))
        // The drain timeout is waited out in full (a reply is lost): 2 s, so that the replies
        // still in flight when sending stops arrive within it however busy the machine is.
        try await withFakeServer(server) { port in
            let configuration = try Self.configuration(
                port: port, drainTimeout: "2s", ["--connections", "2", "--depth", "2", "--requests", "200", "--mix", "echo=1"])
            let result = try await LoadRunner.run(configuration)
            #expect(!result.passed)
            #expect(result.outcome.missingReplies == 1)
            #expect(result.checks.first { !$0.passed }?.name == "every request got exactly one reply")
        }
    }

    /// 100 requests, ECHO and TAP, against a server whose TAP answers with `fault`.
    private func echoAndTap(against fault: FakeProtocolServer.Fault) async throws -> LoadResult {
        var result: LoadResult?
        try await withFakeServer(FakeProtocolServer(fault: fault)) { port in
            let configuration = try Self.configuration(
                port: port, ["--connections", "2", "--requests", "100", "--mix", "echo=1,tap=1"])
            result = try await LoadRunner.run(configuration)
        }
        return try #require(result)
    }

    @Test("ERR busy is a refusal the protocol allows: counted apart, no check fails")
    func busyReply() async throws {
        let result = try await echoAndTap(against: .busyOnTap)
        #expect(result.passed)
        #expect(result.outcome.errorReplies == 0)
        #expect(result.outcome.busyReplies == result.stats.sent(.tap))
    }

    @Test("an ERR reply fails 'no unexpected ERR'")
    func errReply() async throws {
        let result = try await echoAndTap(against: .errOnTap)
        #expect(!result.passed)
        #expect(result.outcome.errorReplies == result.stats.sent(.tap))
        #expect(result.checks.filter { !$0.passed }.map(\.name) == ["no unexpected ERR"])
    }

    @Test("ECHO text that comes back altered fails 'replies match their requests'")
    func corruptEcho() async throws {
        let server = FakeProtocolServer(fault: .corruptEcho)
        try await withFakeServer(server) { port in
            let configuration = try Self.configuration(port: port, ["--connections", "1", "--requests", "20", "--mix", "echo=1"])
            let result = try await LoadRunner.run(configuration)
            #expect(result.outcome.badReplies == 20)
            #expect(!result.passed)
        }
    }

    @Test("raw echo: verbatim echo passes, an altered line fails")
    func rawEcho() async throws {
        try await withFakeServer(nil) { port in
            let configuration = try Self.configuration(
                port: port, ["--raw-echo", "--connections", "3", "--depth", "8", "--requests", "5000", "--line-bytes", "40"])
            let result = try await LoadRunner.run(configuration)
            #expect(result.passed, "\(result.report)")
            #expect(result.stats.count(.echo, .ok) == 5000)
        }
        try await withFakeServer(nil, corruptRaw: true) { port in
            let configuration = try Self.configuration(
                port: port, ["--raw-echo", "--connections", "1", "--requests", "10", "--line-bytes", "40"])
            let result = try await LoadRunner.run(configuration)
            #expect(!result.passed)
            #expect(result.outcome.badReplies == 10)
        }
    }

    @Test("verbatim echo: '<id> ECHO <text>' back counts as OK only with --verbatim-echo; a corrupted line fails")
    func verbatimEcho() async throws {
        try await withFakeServer(nil) { port in
            let configuration = try Self.configuration(
                port: port, ["--verbatim-echo", "--connections", "3", "--depth", "8", "--requests", "5000", "--echo-bytes", "30"])
            let result = try await LoadRunner.run(configuration)
            #expect(result.passed, "\(result.report)")
            #expect(result.stats.count(.echo, .ok) == 5000)
        }
        try await withFakeServer(nil) { port in
            let configuration = try Self.configuration(
                port: port, drainTimeout: "2s", ["--mix", "echo=1", "--connections", "1", "--requests", "10"])
            let result = try await LoadRunner.run(configuration)
            #expect(!result.passed)
            #expect(result.outcome.unexpectedReplies == 10)
        }
        try await withFakeServer(nil, corruptRaw: true) { port in
            let configuration = try Self.configuration(
                port: port, drainTimeout: "2s", ["--verbatim-echo", "--connections", "1", "--requests", "10"])
            let result = try await LoadRunner.run(configuration)
            #expect(!result.passed)
            #expect(result.stats.count(.echo, .ok) == 0)
        }
    }

    @Test("open loop sends at the requested rate for the requested time")
    func openLoop() async throws {
        try await withFakeServer(FakeProtocolServer(fault: .none)) { port in
            let configuration = try Self.configuration(
                port: port, ["--connections", "4", "--rate", "2000", "--duration", "500ms", "--mix", "echo=1"])
            let result = try await LoadRunner.run(configuration)
            #expect(result.passed, "\(result.report)")
            // 2000/s × 0.5 s: one request per intended instant before the deadline, each connection
            // on its own 2 ms grid (250 each), however late the loops ran.
            #expect(result.stats.totalSent == 1000, "sent \(result.stats.totalSent)")
        }
    }

    @Test("nothing listening: the run fails with an error, not a hang")
    func refused() async throws {
        try await withRefusingLoopbackPort { port in
            let configuration = try Self.configuration(port: port, ["--requests", "10"])
            await #expect(throws: LoadError.self) { try await LoadRunner.run(configuration) }
        }
    }

    @Test("the JSON output carries the figures and the checks")
    func json() async throws {
        try await withFakeServer(FakeProtocolServer(fault: .none)) { port in
            let configuration = try Self.configuration(port: port, ["--connections", "1", "--requests", "50", "--mix", "echo=1,tap=1"])
            let result = try await LoadRunner.run(configuration)
            let text = String(decoding: try result.json(), as: UTF8.self)
            #expect(text.contains("\"sent\" : 50"))
            #expect(text.contains("\"passed\" : true"))
            #expect(text.contains("\"p99\""))
            #expect(result.report.contains("result: PASS"))
        }
    }
}
