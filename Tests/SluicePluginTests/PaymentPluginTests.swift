import Sluice
import SluiceBuiltInCodecs
import SluiceLineProtocol
import SluicePayment
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// Payment and its line codec on a manual clock, without sockets.
@Suite struct PaymentPluginTests {
    private func harness(latency: Duration = .milliseconds(20), budget: MemoryBudget = .bytes(1 << 20)) throws -> LineHarness {
        var plugins = PluginRegistry()
        var verbs = LineVerbs()
        let pay = try plugins.register(
            PaymentPlugin(retention: .seconds(60), processor: SimulatedProcessor(latency: latency)), budget: budget)
        try verbs.register(PayLineCodec(pay.plugin), for: pay)
        return try LineHarness(plugins: plugins, verbs: verbs)
    }

    private func charge(of reply: String?) -> String? {
        reply?.split(separator: " ").first { $0.hasPrefix("charge=") }.map(String.init)
    }

    @Test func thePaymentPresetKeepsRecordsADayAndJoinsDuplicates() {
        let payment = IdempotencyOptions.payment
        #expect(payment.retention == .seconds(86_400))
        #expect(payment.lease == .seconds(30))
        #expect(payment.concurrent == .join)
        #expect(payment.cacheErrors)
    }

    @Test func chargesOnceAndReplaysWithTheSameCharge() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request("1 PAY u i 500") == nil)  // in flight for 20 ms
        await harness.advance(by: .milliseconds(20))
        let first = try #require(client.takeReply(to: "1"))
        #expect(first.hasPrefix("1 OK charge=ch_"))
        let replay = await client.request("2 PAY u i 500")
        #expect(replay == "2 " + first.dropFirst(2) + " replayed=true")
        #expect(await client.request("3 STATS")?.hasPrefix("3 OK payments=1 declines=0 ") == true)
    }

    @Test func concurrentDuplicatesJoinTheRunningCharge() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let clients = await (0..<5).asyncMap { _ in await harness.connect() }
        for client in clients { await client.send("1 PAY u i 700") }
        await harness.advance(by: .milliseconds(20))
        let replies = clients.compactMap { $0.takeReply(to: "1") }
        #expect(replies.count == 5)
        #expect(Set(replies.map { charge(of: $0) }).count == 1)
        #expect(replies.filter { $0.hasSuffix(" replayed=true") }.count == 4)
        #expect(await clients[0].request("2 STATS")?.hasPrefix("2 OK payments=1 ") == true)
    }

    @Test func otherAmountIsAMismatchAndRunsNothing() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 PAY u i 500")
        #expect(await client.request("2 PAY u i 501") == "2 MISMATCH")  // while in flight
        await harness.advance(by: .milliseconds(20))
        #expect(await client.request("3 PAY u i 502") == "3 MISMATCH")  // once completed
        #expect(await client.request("4 PAY u i2 502") == nil)  // another idem: runs (in flight)
        await harness.advance(by: .milliseconds(20))
        #expect(await client.request("5 STATS")?.hasPrefix("5 OK payments=2 ") == true)
    }

    @Test func declinesAreStoredAndReplayed() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 PAY u big 1000000")
        await harness.advance(by: .milliseconds(20))
        #expect(client.takeReply(to: "1") == "1 DECLINED reason=amount-limit")
        #expect(await client.request("2 PAY u big 1000000") == "2 DECLINED reason=amount-limit replayed=true")
        #expect(await client.request("3 STATS")?.hasPrefix("3 OK payments=0 declines=1 ") == true)
        await client.send("4 PAY u small 999999")
        await harness.advance(by: .milliseconds(20))
        #expect(client.takeReply(to: "4")?.hasPrefix("4 OK charge=") == true)
    }

    @Test(arguments: ["0", "-5", "+5", "1000000000", "12.5", "1e3", "abc", "99999999999999999999999"])
    func badAmountsAreRefusedAndStoreNothing(amount: String) async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request("1 PAY u i \(amount)") == "1 ERR bad-amount")
        // Nothing was stored: the same record with a good amount runs.
        await client.send("2 PAY u i 10")
        await harness.advance(by: .milliseconds(20))
        #expect(client.takeReply(to: "2")?.hasPrefix("2 OK charge=") == true)
    }

    @Test(arguments: ["1 PAY", "1 PAY u", "1 PAY u i", "1 PAY u i 5 6", "1 PAY u  5"])
    func wrongShapesAreUsageErrors(line: String) async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        #expect(await client.request(line) == "1 ERR usage PAY")
    }

    @Test func cancelBeforeCommitChargesNothingAndReleasesTheRecord() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 PAY u i 500")
        await client.send("2 PAY u i 500")  // joins
        #expect(await client.request("3 CANCEL u pay") == "3 OK cancelled=1")
        #expect(await client.waitForReply(to: "1") == "1 CANCELLED")
        #expect(await client.waitForReply(to: "2") == "2 CANCELLED")
        await harness.advance(by: .milliseconds(50))
        #expect(await client.request("4 STATS")?.hasPrefix("4 OK payments=0 declines=0 returned=0 stale=0 cancelled=1 ") == true)
        // Released: a retry runs anew (not a replay).
        await client.send("5 PAY u i 500")
        await harness.advance(by: .milliseconds(20))
        let retry = try #require(client.takeReply(to: "5"))
        #expect(retry.hasPrefix("5 OK charge=") && !retry.hasSuffix("replayed=true"))
    }

    @Test func aDisconnectDoesNotCancelThePayment() async throws {
        let harness = try harness()
        defer { harness.shutdown() }
        let leaving = await harness.connect()
        await leaving.send("1 PAY u i 500")
        await leaving.close()
        await harness.advance(by: .milliseconds(20))
        let retrying = await harness.connect()
        #expect(await retrying.request("1 PAY u i 500")?.hasSuffix(" replayed=true") == true)
        #expect(await retrying.request("2 STATS")?.hasPrefix("2 OK payments=1 ") == true)
    }

    @Test func aFullTableRefusesNewRecordsWithBusy() async throws {
        let harness = try harness(budget: .entries(2))
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 PAY u a 1")
        await client.send("2 PAY u b 1")
        #expect(await client.request("3 PAY u c 1") == "3 ERR busy")
        await harness.advance(by: .milliseconds(20))
        // The stored records still replay.
        #expect(await client.request("4 PAY u a 1")?.hasSuffix(" replayed=true") == true)
    }
}
