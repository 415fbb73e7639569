import Foundation
import SluiceLibevent
import SluiceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Two `sluice-echo` processes on one `redis-server` (both started here): what one instance
/// decides, the other sees, and a Redis outage never charges a payment twice.
@Suite(.serialized, .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed"))
struct RedisInstancesTests {
    /// One `sluice-echo` process with its line port.
    final class Instance: Sendable {
        let process: ChildProcess
        let port: Int

        init(redis: RedisServerProcess, _ arguments: [String]) async throws {
            try #require(FileManager.default.isExecutableFile(atPath: HTTPShutdownTests.echoServerURL.path))
            // Redis answers within the default 200 ms on an idle machine, not always under a
            // sanitizer with the rest of the suite running: a slow answer would count as an
            // outage (ERR unavailable). A test about outages passes its own timeout.
            let timeout = arguments.contains("--redis-timeout-ms") ? [] : ["--redis-timeout-ms", "5000"]
            // The line port is the kernel's pick, read from the server's log: a port found free
            // beforehand could be taken by another test's server before this one binds it.
            process = try ChildProcess(
                HTTPShutdownTests.echoServerURL.path,
                ["--port", "0", "--http-port", "0", "--loops", String(Self.loops), "--redis", redis.url(), "--instances", "2"]
                    + timeout + arguments,
                captureErrorOutput: true)
            let errors = try #require(process.errorOutput)
            port = try await errors.waitForPort(listening: "[SluiceLineProtocol] listening")
            // The port accepts once it is logged, but each loop connects to Redis on its own, and
            // a call made before its connection is up fails at once (ERR unavailable): wait until
            // every loop is connected to the store, and to the ledger when there is one.
            let connections = Self.loops * (arguments.contains("--processor-ledger") ? 2 : 1)
            try await pollUntil(seconds: 20) {
                if errors.isComplete { throw LineClient.Failure(description: "sluice-echo exited: \(errors.text.suffix(800))") }
                return errors.text.split(separator: "\n").count {
                    $0.contains("connected to Redis") || $0.contains("Redis available again")
                } >= connections
            }
        }

        /// `--loops`: each loop has its own connection to every Redis the instance uses.
        static let loops = 2

        /// A client of this instance whose reads wait at most `timeoutSeconds` (scaled under a
        /// sanitizer).
        func client(timeoutSeconds: Int = 5) throws -> LineClient { try LineClient(port: port, timeoutSeconds: timeoutSeconds) }

        /// Sends one request and reads its reply, waiting at most `timeoutSeconds` for it.
        func send(_ line: String, timeoutSeconds: Int = 5) async throws -> String {
            let client = try client(timeoutSeconds: timeoutSeconds)
            try client.send("r \(line)\n")
            return try await client.readLine()
        }

        /// `payments=` from `STATS`.
        func payments() async throws -> Int {
            let stats = try await send("STATS")
            let field = try #require(stats.split(separator: " ").first { $0.hasPrefix("payments=") })
            return try #require(Int(field.dropFirst("payments=".count)))
        }

        func stop() {
            process.terminateAndWait()
            if let output = process.errorOutput {
                output.waitForEndBlocking()
                #expect(output.sanitizerReports.isEmpty, "port \(port): \(output.sanitizerReports)")
            }
        }
    }

    /// What a storm's connections share.
    final class Storm: Sendable {
        let replies = Mutex<[(pair: Int, reply: String)]>([])
        let sent = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)

        func add(_ pair: Int, _ reply: String) { replies.withSanitizedLock { $0.append((pair, reply)) } }
        var all: [(pair: Int, reply: String)] { replies.withSanitizedLock { $0 } }
    }

    /// The charge id of an `OK charge=<id>` reply.
    static func charge(_ reply: String) -> String? {
        reply.split(separator: " ").first { $0.hasPrefix("charge=") }.map { String($0.dropFirst("charge=".count)) }
    }

    @Test func aPayStormSplitAcrossTwoInstancesChargesOncePerPair() async throws {
        // 400 pairs, each sent to both instances; `SCRIPT FLUSH` mid-storm.
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        let a = try await Instance(redis: redis, ["--pay-latency-ms", "20"])
        defer { a.stop() }
        let b = try await Instance(redis: redis, ["--pay-latency-ms", "20"])
        defer { b.stop() }
        let pairs = 400
        let storm = Storm()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Every pair goes to both instances, on 8 connections each, in opposite orders.
            for (instance, order) in [(a, Array(0..<pairs)), (b, Array((0..<pairs).reversed()))] {
                for lane in 0..<8 {
                    let client = try instance.client()
                    group.addTask {
                        let mine = order.enumerated().filter { $0.offset % 8 == lane }.map(\.element)
                        for pair in mine { try client.send("\(pair) PAY acct\(pair % 7) storm-\(pair) \(pair % 90 + 1)\n") }
                        for _ in mine {
                            let line = try await client.readLine()
                            let pair = try #require(Int(line.split(separator: " ")[0]))
                            storm.add(pair, line)
                        }
                    }
                }
            }
            // Redis forgets its scripts in the middle of the storm: every decision still lands.
            try await pollUntil { storm.all.count >= pairs / 4 }
            #expect(try await redis.command(["SCRIPT", "FLUSH"]) == "OK")
            try await group.waitForAll()
        }
        let all = storm.all
        #expect(all.count == 2 * pairs)
        var charges: [Int: Set<String>] = [:]
        var executed: [Int: Int] = [:]
        for (pair, reply) in all {
            let charge = try #require(Self.charge(reply), "\(reply)")
            charges[pair, default: []].insert(charge)
            if !reply.hasSuffix("replayed=true") { executed[pair, default: 0] += 1 }
        }
        // One charge per pair, the duplicate replayed (or joined) with the same charge id.
        #expect(charges.count == pairs && charges.values.allSatisfy { $0.count == 1 })
        #expect(executed.count == pairs && executed.values.allSatisfy { $0 == 1 })
        #expect(try await a.payments() + b.payments() == pairs)
    }

    /// A payment slower than its lease: its instance renews the lease while it runs, so the
    /// other instance refuses the duplicate throughout and then replays the one charge.
    @Test func aPaymentSlowerThanItsLeaseIsChargedOnceAcrossInstances() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        // A lease of 600 ms, renewed every 200 ms: a stall of a sanitized instance on a busy
        // machine must be longer than 400 ms to lose it (the commit guard would then refuse).
        let options = ["--pay-latency-ms", "3000", "--pay-lease-ms", "600", "--pay-concurrent", "reject"]
        let a = try await Instance(redis: redis, options)
        defer { a.stop() }
        let b = try await Instance(redis: redis, options)
        defer { b.stop() }
        let owner = try a.client(timeoutSeconds: 30)
        try owner.send("1 PAY acct slow 42\n")
        let ownerReply = Task { try await owner.readLine() }
        try await pollUntil { try await redis.command(["EXISTS", "sluice:{pay:4:acctslow}:r"]) == "1" }
        // Five leases long, the duplicate is refused, never run.
        var refusals = 0
        while !(try await redis.command(["HEXISTS", "sluice:{pay:4:acctslow}:r", "result"]) == "1") {
            let reply = try await b.send("PAY acct slow 42")
            #expect(reply == "r ERR conflict" || reply.hasSuffix("replayed=true"), "\(reply)")
            if reply == "r ERR conflict" { refusals += 1 }
        }
        #expect(refusals > 0)
        let first = try await ownerReply.value
        let charge = try #require(Self.charge(first), "\(first)")
        #expect(try await b.send("PAY acct slow 42") == "r OK charge=\(charge) replayed=true")
        #expect(try await a.payments() + b.payments() == 1)
    }

    /// PAY's chain with its record in Redis: a retry replays and spends nothing, a payment the
    /// concurrency stage refuses leaves the account's rate as it was and stores no record, and
    /// one the rate stage refuses stores none either (another amount under its key is no
    /// mismatch).
    @Test func thePaymentChainKeepsItsPromisesThroughRedis() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        let a = try await Instance(
            redis: redis,
            ["--pay-rate", "1", "--pay-period-ms", "600000", "--pay-burst", "1", "--pay-concurrency", "1",
             "--pay-latency-ms", "300"])
        defer { a.stop() }
        // On one connection, in order: k1 takes the account's slot, so k2 is refused for it.
        let client = try a.client()
        try client.send("1 PAY acct k1 10\n2 PAY acct k2 10\n")
        var replies: [String: String] = [:]
        for _ in 0..<2 {
            let line = try await client.readLine()
            replies[String(line.prefix { $0 != " " })] = line
        }
        #expect(replies["2"] == "2 LIMITED policy=pay-concurrency limit=1")
        let charge = try #require(Self.charge(replies["1"] ?? ""), "\(replies)")
        for _ in 0..<3 {
            #expect(try await a.send("PAY acct k1 10") == "r OK charge=\(charge) replayed=true")
        }
        // k2 spent nothing when refused, and the retries of k1 nothing: one unit of two is left.
        let second = try await a.send("PAY acct k2 10")
        #expect(second.hasPrefix("r OK charge=") && !second.hasSuffix("replayed=true"), "\(second)")
        let refused = try await a.send("PAY acct k3 10")
        #expect(refused.hasPrefix("r LIMITED policy=pay-rate retry-after-ms="), "\(refused)")
        #expect(refused.contains(" limit=2 remaining=0 reset-ms="), "\(refused)")
        #expect(try await a.send("PAY acct k3 99").hasPrefix("r LIMITED policy=pay-rate "))
        #expect(try await a.payments() == 2)
    }

    /// PAY's chain is decided by Redis: the slot one instance holds refuses the other's payment
    /// for the same account, and the account's rate counts the payments of both.
    @Test func thePaymentChainIsSharedByEveryInstanceThroughRedis() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        // The first payment holds the account's slot for its latency, while b is asked: five
        // seconds, far more than a request takes under a sanitizer on a busy machine (300 ms was
        // not, under ThreadSanitizer in CI).
        let options = [
            "--pay-rate", "1", "--pay-period-ms", "600000", "--pay-burst", "1", "--pay-concurrency", "1",
            "--pay-latency-ms", "5000",
        ]
        let a = try await Instance(redis: redis, options)
        defer { a.stop() }
        let b = try await Instance(redis: redis, options)
        defer { b.stop() }
        // Its reply comes after the 5 s the payment takes: a 5 s read timeout raced it.
        let client = try a.client(timeoutSeconds: 30)
        try client.send("1 PAY acct k1 10\n")
        // The slot is in Redis, under the account's hash tag, once a admitted its payment.
        try await pollUntil { try await redis.command(["ZCARD", "sluice:{acct}:pay/pay-concurrency:c"]) == "1" }
        #expect(try await b.send("PAY acct k2 10") == "r LIMITED policy=pay-concurrency limit=1")
        let first = try await client.readLine()
        #expect(first.hasPrefix("1 OK charge="), "\(first)")
        try await pollUntil { try await redis.command(["ZCARD", "sluice:{acct}:pay/pay-concurrency:c"]) == "0" }
        // It runs, so it too takes the 5 s of --pay-latency-ms.
        let second = try await b.send("PAY acct k3 10", timeoutSeconds: 30)
        #expect(second.hasPrefix("r OK charge=") && !second.hasSuffix("replayed=true"), "\(second)")
        let refused = try await a.send("PAY acct k4 10")
        #expect(refused.hasPrefix("r LIMITED policy=pay-rate retry-after-ms="), "\(refused)")
        #expect(refused.contains(" limit=2 remaining=0 reset-ms="), "\(refused)")
        #expect(try await b.send("PAY acct k1 10").hasSuffix("replayed=true"))
        #expect(try await a.payments() + b.payments() == 2)
        let ttl = try #require(try await redis.command(["PTTL", "sluice:{acct}:pay/pay-rate:g"]).flatMap { Int($0) })
        #expect(ttl > 0)
    }

    @Test func throttlesAndRateLimitsAreSharedAcrossInstances() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        let options = ["--tap-window-ms", "60000", "--limit-rate", "1", "--limit-period-ms", "60000", "--limit-burst", "2"]
        let a = try await Instance(redis: redis, options)
        defer { a.stop() }
        let b = try await Instance(redis: redis, options)
        defer { b.stop() }
        #expect(try await a.send("TAP user").hasPrefix("r OK tap=1"))
        #expect(try await b.send("TAP user").hasPrefix("r THROTTLED retry-after-ms="))
        #expect(try await b.send("TAP other").hasPrefix("r OK tap=1"))
        #expect(try await a.send("LIMIT api").hasPrefix("r OK limit=3 remaining=2"))
        #expect(try await b.send("LIMIT api").hasPrefix("r OK limit=3 remaining=1"))
        #expect(try await a.send("LIMIT api").hasPrefix("r OK limit=3 remaining=0"))
        #expect(try await b.send("LIMIT api").hasPrefix("r LIMITED policy=limit retry-after-ms="))
        // Every key Sluice wrote carries a TTL.
        for key in ["sluice:{tap:user}:t", "sluice:{tap:other}:t", "sluice:{limit:api}:g"] {
            let ttl = try #require(try await redis.command(["PTTL", key]).flatMap { Int($0) })
            #expect(ttl > 0, "\(key)")
        }
    }

    /// Redis is killed in the middle of a PAY storm and restarted: with the default failure mode
    /// (closed) the instances answer `ERR unavailable` meanwhile, charge nothing twice, and go
    /// back to Redis by themselves. Redis runs with its append-only file, as a store of
    /// payments must.
    @Test func redisKilledMidStormChargesNothingTwiceAndRecovers() async throws {
        let redis = try await RedisServerProcess.start(persistent: true)
        defer { redis.stop() }
        let a = try await Instance(redis: redis, ["--pay-latency-ms", "5", "--redis-timeout-ms", "100"])
        defer { a.stop() }
        let b = try await Instance(redis: redis, ["--pay-latency-ms", "5", "--redis-timeout-ms", "100"])
        defer { b.stop() }
        let storm = Storm()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, instance) in [a, b].enumerated() {
                for lane in 0..<4 {
                    // A claim whose reply the kill lost, and whose release did not reach Redis
                    // before the instance gave up retrying it, holds its pair for the lease
                    // (30 s): the other instance's request for the pair waits that long.
                    let client = try instance.client(timeoutSeconds: 40)
                    group.addTask {
                        var round = 0
                        while !storm.stop.load(ordering: .acquiring) {
                            // Both instances walk the same pairs: each pair is sent about twice.
                            let pair = round * 4 + lane
                            round += 1
                            try client.send("\(pair) PAY acct\(pair % 5) outage-\(pair) \(pair % 40 + 1)\n")
                            let reply = try await client.readLine()
                            storm.add(pair, reply)
                            if index == 0 { storm.sent.add(1, ordering: .relaxed) }
                        }
                    }
                }
            }
            try await pollUntil { storm.sent.load(ordering: .relaxed) >= 200 }
            redis.kill()
            let killedAt = storm.all.count
            try await pollUntil { storm.all[killedAt...].contains { $0.reply.hasSuffix("ERR unavailable") } }
            try await redis.restart()
            let restartedAt = storm.all.count
            // Back to Redis without restarting the instances.
            try await pollUntil(seconds: 15) {
                storm.all[restartedAt...].filter { Self.charge($0.reply) != nil && !$0.reply.hasSuffix("replayed=true") }.count >= 20
            }
            storm.stop.store(true, ordering: .releasing)
            try await group.waitForAll()
        }
        let all = storm.all
        var charges: [Int: Set<String>] = [:]
        for (pair, reply) in all {
            let kind = reply.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            #expect(["OK", "ERR"].contains(kind), "\(reply)")
            if kind == "ERR" { #expect(reply.hasSuffix("ERR unavailable") || reply.hasSuffix("ERR conflict"), "\(reply)") }
            if let charge = Self.charge(reply) { charges[pair, default: []].insert(charge) }
        }
        #expect(all.contains { $0.reply.hasSuffix("ERR unavailable") })
        #expect(charges.values.allSatisfy { $0.count == 1 }, "a pair charged twice")
        // Every charge the processors made belongs to exactly one pair (no lost or double charge).
        try await pollUntil { try await a.payments() + b.payments() == charges.count }
    }

    /// `--redis-failure local`: with Redis gone, a payment runs under this instance's own record
    /// and its reply says so; once Redis is back (empty: it kept nothing on disk), replies say
    /// instead that the store lost its data.
    @Test func localFailureModeRunsPaymentsWithALocalGuarantee() async throws {
        let redis = try await RedisServerProcess.start()
        defer { redis.stop() }
        let a = try await Instance(redis: redis, ["--redis-failure", "local", "--redis-timeout-ms", "1000"])
        defer { a.stop() }
        #expect(try await a.send("PAY acct before 5").hasPrefix("r OK charge="))
        redis.kill()
        try await pollUntil { try await a.send("PAY acct down-\(UUID().uuidString.prefix(8)) 5").hasSuffix("guarantee=local") }
        let local = try await a.send("PAY acct during 5")
        #expect(local.hasSuffix("guarantee=local"), "\(local)")
        #expect(try await a.send("PAY acct during 5").hasSuffix("replayed=true guarantee=local"))
        #expect(try await a.send("TAP user").hasPrefix("r OK tap="))
        try await redis.restart()
        try await pollUntil {
            let reply = try await a.send("PAY acct after-\(UUID().uuidString.prefix(8)) 5")
            return reply.hasPrefix("r OK charge=") && reply.hasSuffix(" guarantee=store-data-lost")
        }
    }
}
