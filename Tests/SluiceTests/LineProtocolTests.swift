import Sluice
import SluiceButtonTap
import SluicePayment
import SluicePluginTesting
import SluiceSearch
import SluiceTestSupport
import Synchronization
import Testing

/// A sluice-echo-like server on real sockets, two loops, plugins on a manual clock.
private struct TestServer {
    let port: Int
    let clock: ManualGateClock
    let server: GateServer
    let group: EventLoopGroup

    func client() throws -> LineClient { try LineClient(port: port) }
}

private func withServer(
    configure: (inout GateConfiguration) -> Void = { _ in },
    payBudget: MemoryBudget = .bytes(1 << 20),
    _ body: (TestServer) async throws -> Void
) async throws {
    let group = try EventLoopGroup(loopCount: 2, namePrefix: "proto")
    let clock = ManualGateClock()
    var configuration = GateConfiguration(tcp: TCPConfiguration(port: 0))
    configure(&configuration)
    var plugins = PluginRegistry()
    try plugins.register(ButtonTapPlugin(window: .milliseconds(200)))
    try plugins.register(PaymentPlugin(retention: .seconds(60), processor: SimulatedProcessor(latency: .milliseconds(20))), budget: payBudget)
    try plugins.register(SearchPlugin(quiet: .milliseconds(100), maxWait: .milliseconds(1000), latency: .milliseconds(30)))
    let server = try GateServer(group: group, configuration: configuration, plugins: plugins, clock: { _ in clock })
    do {
        let port = try await server.start()
        try await body(TestServer(port: port, clock: clock, server: server, group: group))
    } catch {
        group.shutdownGracefully()
        throw error
    }
    group.shutdownGracefully()
}

/// Reads `count` reply lines and indexes them by request id.
private func replies(_ client: LineClient, _ count: Int) throws -> [String: String] {
    var byID: [String: String] = [:]
    for line in try client.readLines(count) {
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
            #expect(try client.readLines(6) == [
                "a PONG", "b PONG", "c.d_e:f-9 OK hello  world ", "d ERR usage PING", "e ERR usage ECHO", "f ERR usage ECHO",
            ])
        }
    }

    @Test func echoIsRateLimitedPerConnection() async throws {
        try await withServer(configure: { $0.echoRate = 1; $0.echoBurst = 3 }) { server in
            let client = try server.client()
            try client.send((1...4).map { "\($0) ECHO x\n" }.joined())
            let lines = try client.readLines(4)
            #expect(Array(lines.prefix(3)) == ["1 OK x", "2 OK x", "3 OK x"])
            let limited = lines[3]
            #expect(limited.hasPrefix("4 LIMITED retry-after-ms="))
            let wait = Int(limited.split(separator: "=").last ?? "") ?? -1
            #expect((1...1000).contains(wait))
            // Another connection has its own budget.
            let other = try server.client()
            try other.send("1 ECHO y\n")
            #expect(try other.readLine() == "1 OK y")
        }
    }

    @Test func tapWindowBoundaries() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 TAP k\n")
            #expect(try client.readLine() == "1 OK tap=1")
            await server.clock.advance(by: .milliseconds(150))
            try client.send("2 TAP k\n")
            #expect(try client.readLine() == "2 THROTTLED retry-after-ms=50")
            await server.clock.advance(by: .milliseconds(49))
            try client.send("3 TAP k\n")
            #expect(try client.readLine() == "3 THROTTLED retry-after-ms=1")
            await server.clock.advance(by: .milliseconds(1))
            try client.send("4 TAP k\n5 TAP other\n")
            // The two keys may live on different loops: replies in either order.
            let byID = try replies(client, 2)
            #expect(byID == ["4": "4 OK tap=2", "5": "5 OK tap=1"])
        }
    }

    @Test func fiftyConnectionsSendingTheSamePaymentChargeOnce() async throws {
        try await withServer { server in
            let clients = try (0..<50).map { _ in try server.client() }
            for client in clients { try client.send("p PAY acct idem-1 1234\n") }
            // Every request has reached its shard before the processor's 20 ms pass.
            try await waitUntil { await server.server.runningEffects() == 1 }
            try await Task.sleep(for: .milliseconds(50))
            await server.clock.advance(by: .milliseconds(20))
            let lines = try clients.map { try $0.readLine() }
            let charges = Set(lines.map { $0.split(separator: " ")[2] })
            #expect(charges.count == 1)
            #expect(lines.allSatisfy { $0.hasPrefix("p OK charge=ch_") })
            #expect(lines.filter { $0.hasSuffix(" replayed=true") }.count == 49)
            let stats = try server.client()
            try stats.send("s STATS\n")
            #expect(try stats.readLine().hasPrefix("s OK taps=0 payments=1 declines=0 "))
        }
    }

    @Test func aClientThatDisconnectsMidPaymentFindsItReplayed() async throws {
        try await withServer { server in
            do {
                let leaving = try server.client()
                try leaving.send("1 PAY acct idem-2 500\n")
                try await waitUntil { await server.server.runningEffects() == 1 }
            }
            // The server reads the end of the stream; the payment goes on (it lives in the key's
            // scope), and its reply has nowhere to go.
            try await Task.sleep(for: .milliseconds(50))
            #expect(await server.server.runningEffects() == 1)
            await server.clock.advance(by: .milliseconds(20))
            try await waitUntil { server.server.connectionCount == 0 }
            let retrying = try server.client()
            try retrying.send("2 PAY acct idem-2 500\n3 STATS\n")
            let byID = try replies(retrying, 2)
            #expect(byID["2"]?.hasPrefix("2 OK charge=ch_") == true)
            #expect(byID["2"]?.hasSuffix(" replayed=true") == true)
            #expect(byID["3"]?.hasPrefix("3 OK taps=0 payments=1 ") == true)
        }
    }

    @Test func paymentRows() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 PAY a i 100\n")
            try await waitUntil { await server.server.runningEffects() == 1 }
            try client.send("2 PAY a i 101\n3 PAY a i 100\n")
            #expect(try client.readLine() == "2 MISMATCH")
            await server.clock.advance(by: .milliseconds(20))
            let byID = try replies(client, 2)
            let charge = try #require(byID["1"]).dropFirst(2)
            #expect(charge.hasPrefix("OK charge="))
            #expect(byID["3"] == "3 \(charge) replayed=true")
            try client.send("4 PAY a big 1000000\n")
            try await waitUntil { await server.server.runningEffects() == 1 }
            await server.clock.advance(by: .milliseconds(20))
            #expect(try client.readLine() == "4 DECLINED reason=amount-limit")
            try client.send("5 PAY a big 1000000\n6 PAY a x 0\n7 PAY a x 1000000000\n8 PAY a x\n9 PAY a x -3\n")
            let rows = try client.readLines(5).sorted()
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
            try await waitUntil { await server.server.runningEffects() == 1 }
            try other.send("2 PAY a i 100\n")
            try await Task.sleep(for: .milliseconds(20))
            try client.send("3 CANCEL a pay\n")
            let byID = try replies(client, 2)
            #expect(byID["3"] == "3 OK cancelled=1")
            #expect(byID["1"] == "1 CANCELLED")
            #expect(try other.readLine() == "2 CANCELLED")
            // Not charged, record released: the retry runs anew.
            try client.send("4 PAY a i 100\n")
            try await waitUntil { await server.server.runningEffects() == 1 }
            await server.clock.advance(by: .milliseconds(20))
            let retry = try client.readLine()
            #expect(retry.hasPrefix("4 OK charge=") && !retry.hasSuffix("replayed=true"))
            try client.send("5 STATS\n")
            #expect(try client.readLine().hasPrefix("5 OK taps=0 payments=1 declines=0 searches=0 cancelled=1 "))
        }
    }

    @Test func aBurstOfSearchesRunsOnlyTheLast() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 SEARCH k a\n2 SEARCH k ab\n3 SEARCH k abc\n")
            #expect(try client.readLines(2) == ["1 SUPERSEDED", "2 SUPERSEDED"])
            await server.clock.advance(by: .milliseconds(100))
            await server.clock.advance(by: .milliseconds(30))
            #expect(try client.readLine() == "3 OK results=abc")
            try client.send("4 STATS\n")
            #expect(try client.readLine().contains(" searches=1 "))
        }
    }

    @Test func cancelARunningSearchAndANewerSearchCancelsTheRunningOne() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 SEARCH k one\n")
            try await waitUntil { await server.server.runningEffects() == 1 }
            await server.clock.advance(by: .milliseconds(110))  // running now
            try client.send("2 CANCEL k search\n")
            let first = try replies(client, 2)
            #expect(first["2"] == "2 OK cancelled=1")
            #expect(first["1"] == "1 CANCELLED")
            try client.send("3 SEARCH k two\n")
            try await waitUntil { await server.server.runningEffects() == 1 }
            await server.clock.advance(by: .milliseconds(110))
            let other = try server.client()
            try other.send("4 SEARCH k three\n")  // from another connection, same key
            #expect(try client.readLine() == "3 CANCELLED")
            await server.clock.advance(by: .milliseconds(130))
            #expect(try other.readLine() == "4 OK results=three")
        }
    }

    @Test func pipelinedRequestsGetOutOfOrderRepliesMatchedByID() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("slow PAY a i 5\nfast PING\nsearch SEARCH k q\ntap TAP k\n")
            #expect(try client.readLines(2) == ["fast PONG", "tap OK tap=1"])
            await server.clock.advance(by: .milliseconds(200))
            let byID = try replies(client, 2)
            #expect(byID["slow"]?.hasPrefix("slow OK charge=") == true)
            #expect(byID["search"] == "search OK results=q")
        }
    }

    @Test func malformedInputsGetErrorsAndTheConnectionStaysOpen() async throws {
        try await withServer(configure: { $0.tcp.maximumLineLength = 140 }) { server in
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
            var rows = try client.readLines(16)
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
            _ = try second.readLine()
            try client.send("1 TAP a\n2 TAP b\n3 STATS\n")
            let byID = try replies(client, 3)
            #expect(byID["3"] == "3 OK taps=2 payments=0 declines=0 searches=0 cancelled=0 keys=2 connections=2")
        }
    }

    @Test func aFullPaymentTableAnswersBusy() async throws {
        try await withServer(payBudget: .entries(2)) { server in
            let client = try server.client()
            // Two shards hold one record each: of six new records, four are refused.
            for index in 0..<6 {
                try client.send("\(index) PAY acct\(index) i 1\n")
            }
            let lines = try client.readLines(4)
            #expect(lines.allSatisfy { $0.hasSuffix(" ERR busy") })
            try await waitUntil { await server.server.runningEffects() == 2 }
        }
    }

    @Test func shuttingDownRefusesNewRequests() async throws {
        try await withServer(configure: { $0.shutdownGracePeriod = .milliseconds(100) }) { server in
            let client = try server.client()
            try client.send("1 PING\n")
            #expect(try client.readLine() == "1 PONG")
            await server.server.drain()
            try client.send("2 PING\n3 TAP k\n")
            #expect(try client.readLines(2) == ["2 ERR shutting-down", "3 ERR shutting-down"])
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
                try await waitUntil { await server.server.runningEffects() == 2 }
            }
            try await Task.sleep(for: .milliseconds(50))
            // The payment's reply reaches a closed socket; the peer resets the connection.
            await server.clock.advance(by: .milliseconds(20))
            try await Task.sleep(for: .milliseconds(50))
            // The search's reply is written after the reset.
            await server.clock.advance(by: .milliseconds(100))
            await server.clock.advance(by: .milliseconds(30))
            try await waitUntil { server.server.connectionCount == 0 }
            let client = try server.client()
            try client.send("3 PING\n4 STATS\n")
            let byID = try replies(client, 2)
            #expect(byID["3"] == "3 PONG")
            #expect(byID["4"]?.contains(" payments=1 ") == true)
            #expect(byID["4"]?.contains(" searches=1 ") == true)
        }
    }

    @Test func halfClosedClientsStillGetTheirReplies() async throws {
        try await withServer { server in
            let client = try server.client()
            try client.send("1 PAY a i 9\n2 PING\n")
            client.shutdownWrite()
            #expect(try client.readLine() == "2 PONG")
            try await waitUntil { await server.server.runningEffects() == 1 }
            await server.clock.advance(by: .milliseconds(20))
            #expect(try client.readLine().hasPrefix("1 OK charge="))
            #expect(try client.waitForClose())
        }
    }
}

/// Polls `condition` (a few seconds at most).
func waitUntil(_ condition: () async -> Bool) async throws {
    for _ in 0..<500 {
        if await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("condition not met in time")
}
