import Sluice
import SluiceBuiltInCodecs
import SluiceButtonTap
import SluiceLineProtocol
import SluicePage
import SluicePayment
import SluicePluginTesting
import SluiceRateLimit
import SluiceSearch
import SluiceTestSupport
import Synchronization
import Testing

/// A sluice-echo-like server on real sockets, two loops, plugins on a manual clock.
struct TestServer {
    let port: Int
    let clock: ManualGateClock
    let gate: Gate
    let server: LineServer
    let group: SluiceLoopGroup

    func client() throws -> LineClient { try LineClient(port: port) }

    /// Executions held or running, over every shard.
    func executions() async -> Int { await gate.statistics().executions }

    /// Requests waiting for a result, over every shard.
    func waiters() async -> Int { await gate.statistics().waiters }
}

func withServer(
    loops: Int = 2,
    loopClock: ManualLoopClock? = nil,
    configure: (inout LineConfiguration) -> Void = { _ in },
    payBudget: MemoryBudget = .bytes(1 << 20),
    _ body: (TestServer) async throws -> Void
) async throws {
    let group = try SluiceLoopGroup(loopCount: loops, namePrefix: "proto", clock: loopClock)
    let clock = ManualGateClock()
    var configuration = LineConfiguration(tcp: TCPConfiguration(port: 0))
    configure(&configuration)
    var plugins = PluginRegistry()
    var verbs = LineVerbs()
    let tap = try plugins.register(ButtonTapPlugin(window: .milliseconds(200)))
    try verbs.register(TapLineCodec(tap.plugin), for: tap)
    let pay = try plugins.register(
        PaymentPlugin(retention: .seconds(60), processor: SimulatedProcessor(latency: .milliseconds(20))), budget: payBudget)
    try verbs.register(PayLineCodec(pay.plugin), for: pay)
    let search = try plugins.register(SearchPlugin(quiet: .milliseconds(100), maxWait: .milliseconds(1000), latency: .milliseconds(30)))
    try verbs.register(SearchLineCodec(search.plugin), for: search)
    let limit = try plugins.register(RateLimitPlugin(count: 10, per: .seconds(1), burst: 2))
    try verbs.register(LimitLineCodec(limit.plugin), for: limit)
    let page = try plugins.register(PagePlugin(latency: .milliseconds(40), pageSize: 2))
    try verbs.register(PageLineCodec(page.plugin), for: page)
    let gate = try Gate(group: group, plugins: plugins, options: GateOptions(shutdownGracePeriod: .zero), clock: clock.clock(for:))
    let server = try LineServer(gate: gate, verbs: verbs, configuration: configuration)
    do {
        let port = try await server.start()
        try await body(TestServer(port: port, clock: clock, gate: gate, server: server, group: group))
    } catch {
        group.shutdownGracefully()
        clock.cancelAll()
        throw error
    }
    group.shutdownGracefully()
    // Timers never fired hold what they would have run (a shard's sweep): drop them.
    clock.cancelAll()
}

/// Reads `count` reply lines and indexes them by request id.
func replies(_ client: LineClient, _ count: Int) async throws -> [String: String] {
    var byID: [String: String] = [:]
    for line in try await client.readLines(count) {
        let id = String(line.prefix { $0 != " " })
        #expect(byID[id] == nil, "two replies to \(id)")
        byID[id] = line
    }
    return byID
}

@Suite struct LineProtocolTests {
    @Test func pingEchoAndCaseInsensitiveVerbs() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("a PING\nb ping\nc.d_e:f-9 Echo hello  world \nd PING x\ne ECHO\nf ECHO \n")
            #expect(try await client.readLines(6) == [
                "a PONG", "b PONG", "c.d_e:f-9 OK hello  world ", "d ERR usage PING", "e ERR usage ECHO", "f ERR usage ECHO",
            ])
        }
    }

    @Test func echoIsRateLimitedPerConnection() async throws {
        try await withServer(configure: { $0.echoRate = 1; $0.echoBurst = 3 }) { server in
            let client = try server.client()
            try client.send((1...4).map { "\($0) ECHO x\n" }.joined())
            let lines = try await client.readLines(4)
            #expect(Array(lines.prefix(3)) == ["1 OK x", "2 OK x", "3 OK x"])
            let limited = lines[3]
            #expect(limited.hasPrefix("4 LIMITED retry-after-ms="))
            let wait = Int(limited.split(separator: "=").last ?? "") ?? -1
            #expect((1...1000).contains(wait))
            // Another connection has its own budget.
            let other = try server.client()
            try other.send("1 ECHO y\n")
            #expect(try await other.readLine() == "1 OK y")
        }
    }

    @Test func tapWindowBoundaries() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 TAP k\n")
            #expect(try await client.readLine() == "1 OK tap=1")
            await server.clock.advance(by: .milliseconds(150))
            try client.send("2 TAP k\n")
            #expect(try await client.readLine() == "2 THROTTLED retry-after-ms=50")
            await server.clock.advance(by: .milliseconds(49))
            try client.send("3 TAP k\n")
            #expect(try await client.readLine() == "3 THROTTLED retry-after-ms=1")
            await server.clock.advance(by: .milliseconds(1))
            try client.send("4 TAP k\n5 TAP other\n")
            // The two keys may live on different loops: replies in either order.
            let byID = try await replies(client, 2)
            #expect(byID == ["4": "4 OK tap=2", "5": "5 OK tap=1"])
        }
    }

    @Test func fiftyConnectionsSendingTheSamePaymentChargeOnce() async throws {
        try await withServer { server in
            let clients = try (0..<50).map { _ in try server.client() }
            for client in clients { try client.send("p PAY acct idem-1 1234\n") }
            // Every request has reached its shard (one charge, fifty waiting) before the
            // processor's 20 ms pass.
            try await pollUntil { await server.waiters() == 50 }
            #expect(await server.executions() == 1)
            await server.clock.advance(by: .milliseconds(20))
            let lines = try await clients.asyncMap { try await $0.readLine() }
            let charges = Set(lines.map { $0.split(separator: " ")[2] })
            #expect(charges.count == 1)
            #expect(lines.allSatisfy { $0.hasPrefix("p OK charge=ch_") })
            #expect(lines.filter { $0.hasSuffix(" replayed=true") }.count == 49)
            let stats = try server.client()
            try stats.send("s STATS\n")
            #expect(try await stats.readLine().hasPrefix("s OK taps=0 payments=1 declines=0 "))
        }
    }

    @Test func aClientThatDisconnectsMidPaymentFindsItReplayed() async throws {
        try await withServer { server in
            do {
                let leaving = try server.client()
                try leaving.send("1 PAY acct idem-2 500\n")
                try await pollUntil { await server.executions() == 1 }
            }
            // The payment goes on (it lives in the key's scope) whether or not the server has
            // read the end of the stream yet, and its reply has nowhere to go.
            await server.clock.advance(by: .milliseconds(20))
            try await pollUntil { server.server.connectionCount == 0 }
            let retrying = try server.client()
            try retrying.send("2 PAY acct idem-2 500\n3 STATS\n")
            let byID = try await replies(retrying, 2)
            #expect(byID["2"]?.hasPrefix("2 OK charge=ch_") == true)
            #expect(byID["2"]?.hasSuffix(" replayed=true") == true)
            #expect(byID["3"]?.hasPrefix("3 OK taps=0 payments=1 ") == true)
        }
    }

    @Test func paymentRows() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 PAY a i 100\n")
            try await pollUntil { await server.executions() == 1 }
            try client.send("2 PAY a i 101\n3 PAY a i 100\n")
            #expect(try await client.readLine() == "2 MISMATCH")
            await server.clock.advance(by: .milliseconds(20))
            let byID = try await replies(client, 2)
            let charge = try #require(byID["1"]).dropFirst(2)
            #expect(charge.hasPrefix("OK charge="))
            #expect(byID["3"] == "3 \(charge) replayed=true")
            try client.send("4 PAY a big 1000000\n")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(20))
            #expect(try await client.readLine() == "4 DECLINED reason=amount-limit")
            try client.send("5 PAY a big 1000000\n6 PAY a x 0\n7 PAY a x 1000000000\n8 PAY a x\n9 PAY a x -3\n")
            let rows = try await client.readLines(5).sorted()
            #expect(rows == [
                "5 DECLINED reason=amount-limit replayed=true", "6 ERR bad-amount", "7 ERR bad-amount",
                "8 ERR usage PAY", "9 ERR bad-amount",
            ])
        }
    }

    @Test func cancelARunningPaymentAndItsDuplicates() async throws {
        try await withServer { server in
            let client = try server.client()
            let other = try server.client()
            try client.send("1 PAY a i 100\n")
            try await pollUntil { await server.executions() == 1 }
            try other.send("2 PAY a i 100\n")
            // The duplicate has joined before the cancel is sent.
            try await pollUntil { await server.waiters() == 2 }
            try client.send("3 CANCEL a pay\n")
            let byID = try await replies(client, 2)
            #expect(byID["3"] == "3 OK cancelled=1")
            #expect(byID["1"] == "1 CANCELLED")
            #expect(try await other.readLine() == "2 CANCELLED")
            // Not charged, record released: the retry runs anew.
            try client.send("4 PAY a i 100\n")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(20))
            let retry = try await client.readLine()
            #expect(retry.hasPrefix("4 OK charge=") && !retry.hasSuffix("replayed=true"))
            try client.send("5 STATS\n")
            #expect(try await client.readLine().hasPrefix("5 OK taps=0 payments=1 declines=0 returned=0 stale=0 searches=0 cancelled=1 "))
        }
    }

    @Test func aBurstOfSearchesRunsOnlyTheLast() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 SEARCH k a\n2 SEARCH k ab\n3 SEARCH k abc\n")
            #expect(try await client.readLines(2) == ["1 SUPERSEDED", "2 SUPERSEDED"])
            await server.clock.advance(by: .milliseconds(100))
            await server.clock.advance(by: .milliseconds(30))
            #expect(try await client.readLine() == "3 OK results=abc")
            try client.send("4 STATS\n")
            #expect(try await client.readLine().contains(" searches=1 "))
        }
    }

    @Test func cancelARunningSearchAndANewerSearchCancelsTheRunningOne() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 SEARCH k one\n")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(110))  // running now
            try client.send("2 CANCEL k search\n")
            let first = try await replies(client, 2)
            #expect(first["2"] == "2 OK cancelled=1")
            #expect(first["1"] == "1 CANCELLED")
            try client.send("3 SEARCH k two\n")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(110))
            let other = try server.client()
            try other.send("4 SEARCH k three\n")  // from another connection, same key
            #expect(try await client.readLine() == "3 CANCELLED")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(130))
            #expect(try await other.readLine() == "4 OK results=three")
        }
    }

    @Test func pipelinedRequestsGetOutOfOrderRepliesMatchedByID() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("slow PAY a i 5\nfast PING\nsearch SEARCH k q\ntap TAP k\n")
            #expect(try await client.readLines(2) == ["fast PONG", "tap OK tap=1"])
            await server.clock.advance(by: .milliseconds(200))
            let byID = try await replies(client, 2)
            #expect(byID["slow"]?.hasPrefix("slow OK charge=") == true)
            #expect(byID["search"] == "search OK results=q")
        }
    }

    @Test func malformedInputsGetErrorsAndTheConnectionStaysOpen() async throws {
        try await withServer(configure: { $0.framing.maximumLineLength = 140 }) { server in
            let client = try server.client()
            var bytes: [UInt8] = Array("1 ECHO caf".utf8) + [0xC3, 0x28] + Array("\n".utf8)  // not UTF-8
            bytes += Array("\n".utf8)  // empty line: no id
            bytes += Array("bad/id PING\n".utf8)
            bytes += Array((String(repeating: "x", count: 33) + " PING\n").utf8)  // id too long
            bytes += Array(" PING\n".utf8)  // empty id
            bytes += Array("lonely\n".utf8)  // id, no verb
            bytes += Array("2 FROB k\n".utf8)
            bytes += Array(("3 ECHO " + String(repeating: "y", count: 140) + "\n").utf8)
            bytes += Array("4 TAP \(String(repeating: "k", count: 129))\n".utf8)
            bytes += Array("5 CANCEL k nope\n6 CANCEL k\n7 STATS now\n".utf8)
            bytes += Array("9 CANCEL k tap\n10 CANCEL k pay extra\n11 cancel k PAY\n".utf8)
            bytes += Array("8 PING\n".utf8)
            try client.send(bytes)
            var rows = try await client.readLines(16)
            // CANCEL replies come from the key's shard, maybe on the other loop.
            let cancel = rows.last { $0.hasPrefix("11 ") }
            rows.removeAll { $0.hasPrefix("11 ") }
            #expect(rows == [
                "- ERR malformed", "- ERR malformed", "- ERR malformed", "- ERR malformed", "- ERR malformed",
                "lonely ERR unknown-verb", "2 ERR unknown-verb", "- ERR line-too-long", "4 ERR usage TAP",
                "5 ERR usage CANCEL", "6 ERR usage CANCEL", "7 ERR usage STATS", "9 ERR usage CANCEL",
                "10 ERR usage CANCEL", "8 PONG",
            ])
            #expect(cancel == "11 OK cancelled=0")
        }
    }

    @Test func statsReportsEveryField() async throws {
        try await withServer { server in
            let client = try server.client()
            let second = try server.client()
            try second.send("x PING\n")
            _ = try await second.readLine()
            try client.send("1 TAP a\n2 TAP b\n3 STATS\n")
            let byID = try await replies(client, 3)
            #expect(byID["3"] == "3 OK taps=2 payments=0 declines=0 returned=0 stale=0 searches=0 cancelled=0 evicted=0 keys=2 connections=2")
        }
    }

    @Test func aFullPaymentTableAnswersBusy() async throws {
        try await withServer(payBudget: .entries(2)) { server in
            let client = try server.client()
            // Two shards hold one record each: of six new records, the first on each shard runs
            // and the others are refused. Which shard owns a key is a stable hash of it.
            let shards = (0..<6).map { server.gate.shardIndex(forKey: "acct\($0)") }
            let running = Set(Set(shards).compactMap { shard in shards.firstIndex(of: shard) })
            #expect(running.count == 2)
            for index in 0..<6 {
                try client.send("\(index) PAY acct\(index) i 1\n")
            }
            let byID = try await replies(client, 4)
            #expect(Set(byID.keys) == Set((0..<6).filter { !running.contains($0) }.map(String.init)))
            #expect(byID.values.allSatisfy { $0.hasSuffix(" ERR busy") })
            try await pollUntil { await server.executions() == 2 }
        }
    }

    @Test func shuttingDownRefusesNewRequests() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 PING\n")
            #expect(try await client.readLine() == "1 PONG")
            await server.server.stopAccepting()
            await server.gate.shutdown()
            try client.send("2 PING\n3 TAP k\n")
            #expect(try await client.readLines(2) == ["2 ERR shutting-down", "3 ERR shutting-down"])
        }
    }

    /// A client that closes with two replies still to come: the first reply makes its kernel
    /// answer RST, so the second write fails with EPIPE. That must close the connection, not
    /// raise SIGPIPE (whose default action would end this test process).
    @Test func aReplyToAClientThatHasGoneCostsTheConnectionNotTheProcess() async throws {
        try await withServer { server in
            do {
                let leaving = try server.client()
                try leaving.send("1 PAY gone idem 9\n2 SEARCH gone q\n")
                // The payment runs; the search waits out its quiet time.
                try await pollUntil { await server.executions() == 2 }
            }
            // The payment's reply reaches a closed socket; the peer's kernel answers with a
            // reset (on loopback, at once).
            await server.clock.advance(by: .milliseconds(20))
            // The search's reply is written after the reset, in a later loop iteration.
            await server.clock.advance(by: .milliseconds(100))
            await server.clock.advance(by: .milliseconds(30))
            try await pollUntil { server.server.connectionCount == 0 }
            let client = try server.client()
            try client.send("3 PING\n4 STATS\n")
            let byID = try await replies(client, 2)
            #expect(byID["3"] == "3 PONG")
            #expect(byID["4"]?.contains(" payments=1 ") == true)
            // Usually the server has read the client's end of stream (and stopped reading) before
            // the payment's reply: the search runs and its reply meets the reset. On a loaded
            // machine the payment's reply may go out first: the server's next read gets the
            // reset, the connection closes and cancels its search (no second write). Nothing
            // else may happen.
            let fields = Dictionary(
                (byID["4"] ?? "").split(separator: " ").compactMap { field -> (String, String)? in
                    let parts = field.split(separator: "=", maxSplits: 1)
                    return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
                },
                uniquingKeysWith: { first, _ in first })
            let ran = fields["searches"] == "1" && fields["cancelled"] == "0"
            let cancelledFirst = fields["searches"] == "0" && fields["cancelled"] == "1"
            #expect(ran || cancelledFirst, "STATS: \(byID["4"] ?? "none")")
        }
    }

    @Test func halfClosedClientsStillGetTheirReplies() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 PAY a i 9\n2 PING\n")
            client.shutdownWrite()
            #expect(try await client.readLine() == "2 PONG")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(20))
            #expect(try await client.readLine().hasPrefix("1 OK charge="))
            #expect(try await client.waitForClose())
        }
    }

    @Test func limitRows() async throws {
        // 10 per second (100 ms apart), burst 2: a limit of 3.
        try await withServer { server in
            let client = try server.client()
            try client.send("1 LIMIT k\n2 LIMIT k 2\n3 LIMIT k\n4 LIMIT other 3\n")
            let byID = try await replies(client, 4)
            #expect(byID["1"] == "1 OK limit=3 remaining=2 reset-ms=100")
            #expect(byID["2"] == "2 OK limit=3 remaining=0 reset-ms=300")
            #expect(byID["3"] == "3 LIMITED policy=limit retry-after-ms=100 limit=3 remaining=0 reset-ms=300")
            #expect(byID["4"] == "4 OK limit=3 remaining=0 reset-ms=300")
            await server.clock.advance(by: .milliseconds(100))
            try client.send("5 LIMIT k\n")
            #expect(try await client.readLine() == "5 OK limit=3 remaining=0 reset-ms=300")
            try client.send("6 LIMIT k 0\n7 LIMIT k 4\n8 LIMIT k -1\n9 LIMIT k 1.5\n10 LIMIT\n11 LIMIT k 1 2\n12 limit k x\n")
            #expect(try await client.readLines(7) == [
                "6 ERR bad-cost", "7 ERR bad-cost", "8 ERR bad-cost", "9 ERR bad-cost", "10 ERR usage LIMIT",
                "11 ERR usage LIMIT", "12 ERR bad-cost",
            ])
            try client.send("13 CANCEL k limit\n")
            #expect(try await client.readLine() == "13 ERR usage CANCEL")
        }
    }

    @Test func pageLoadsAreSharedWhileInFlight() async throws {
        try await withServer { server in
            let first = try server.client()
            let second = try server.client()
            try first.send("1 PAGE feed 5\n")
            try await pollUntil { await server.executions() == 1 }
            try second.send("2 PAGE feed 5\n")
            try await pollUntil { await server.waiters() == 2 }
            await server.clock.advance(by: .milliseconds(40))
            #expect(try await first.readLine() == "1 OK page=5 items=feed-10,feed-11 shared=false")
            #expect(try await second.readLine() == "2 OK page=5 items=feed-10,feed-11 shared=true")
            // Nothing is kept: the next load is the leader's again.
            try first.send("3 PAGE feed 5\n")
            try await pollUntil { await server.executions() == 1 }
            await server.clock.advance(by: .milliseconds(40))
            #expect(try await first.readLine() == "3 OK page=5 items=feed-10,feed-11 shared=false")
            try first.send("4 PAGE feed -1\n5 PAGE feed 1000001\n6 PAGE feed\n7 PAGE feed x\n")
            #expect(try await first.readLines(4) == ["4 ERR bad-page", "5 ERR bad-page", "6 ERR usage PAGE", "7 ERR bad-page"])
        }
    }

    @Test func aClosedConnectionLeavesTheLoadWhichEndsOnlyWithItsLastWaiter() async throws {
        try await withServer { server in
            let staying = try server.client()
            let leaving = try server.client()
            try leaving.send("1 PAGE feed 1\n")
            try await pollUntil { await server.executions() == 1 }
            try staying.send("2 PAGE feed 1\n")
            try await pollUntil { await server.waiters() == 2 }
            // The leader's connection fails (a half-close would still get its reply): it leaves,
            // and the load goes on for the other.
            leaving.abort()
            try await pollUntil { await server.waiters() == 1 }
            #expect(await server.executions() == 1)
            await server.clock.advance(by: .milliseconds(40))
            #expect(try await staying.readLine() == "2 OK page=1 items=feed-2,feed-3 shared=true")
            // CANCEL reaches a load and every waiter.
            try staying.send("3 PAGE feed 2\n")
            try await pollUntil { await server.executions() == 1 }
            try staying.send("4 CANCEL feed page\n")
            let byID = try await replies(staying, 2)
            #expect(byID == ["3": "3 CANCELLED", "4": "4 OK cancelled=1"])
        }
    }

    @Test func aSearchWhoseQueryHoldsACarriageReturnIsAUsageError() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send(Array("1 SEARCH k a\rb\n2 PING\n".utf8))
            #expect(try await client.readLines(2) == ["1 ERR usage SEARCH", "2 PONG"])
        }
    }

    @Test func anEchoWhoseTextHoldsACarriageReturnIsAUsageError() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send(Array("1 ECHO a\r2 OK forged\n2 ECHO a b\n".utf8))
            #expect(try await client.readLines(2) == ["1 ERR usage ECHO", "2 OK a b"])
        }
    }

}
