import Foundation
import SluiceLibevent
import SluiceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Exactly-once under the faults production meets, with real processes: two `sluice-echo` on
/// one `redis-server` store, their simulated processors sharing a ledger in a `redis-server` of
/// its own (`--processor-ledger`), as a payment provider is shared. Clients retry on their own
/// instance until they hold a charge.
@Suite(.serialized, .enabled(if: RedisServerProcess.isInstalled, "redis-server is not installed"))
struct ExactlyOnceFaultTests {
    typealias Instance = RedisInstancesTests.Instance

    /// What the clients of a scenario got: every charge id per pair, every reply.
    final class Tally: Sendable {
        private let state = Mutex<(charges: [String: Set<String>], replies: [String])>(([:], []))

        func add(_ pair: String, _ reply: String) {
            state.withSanitizedLock { state in
                state.replies.append(reply)
                if let charge = RedisInstancesTests.charge(reply) { state.charges[pair, default: []].insert(charge) }
            }
        }

        var charges: [String: Set<String>] { state.withSanitizedLock { $0.charges } }
        var replies: [String] { state.withSanitizedLock { $0.replies } }
    }

    /// Sends `PAY` for `pair` on `instance` until a charge comes back (an `ERR` is retried after
    /// 50 ms; a connection that fails is made again), for at most `seconds` (times
    /// ``deadlineScale``).
    static func payUntilCharged(
        _ instance: Instance, account: String, idem: String, amount: Int = 10, tally: Tally, seconds: Double = 30
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds * Double(deadlineScale))
        while ContinuousClock.now < deadline {
            if let reply = try? await instance.send("PAY \(account) \(idem) \(amount)") {
                tally.add("\(account)/\(idem)", reply)
                if RedisInstancesTests.charge(reply) != nil { return }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("\(account)/\(idem) never settled on port \(instance.port)")
    }

    /// How many payment records the store holds whose idempotency key matches `pattern` (a
    /// `KEYS` glob), for the accounts `acct…` these tests pay from.
    static func records(in store: RedisServerProcess, matching pattern: String) async throws -> Int {
        let count = try await store.command(["EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "sluice:{pay:*:acct*\(pattern)}:r"])
        return count.flatMap { Int($0) } ?? 0
    }

    /// How many records the ledger holds (charges made, one per record).
    static func ledgerEntries(_ ledger: RedisServerProcess) async throws -> Int {
        let count = try await ledger.command(["EVAL", "return #redis.call('KEYS', 'ledger:*')", "0"])
        return try #require(count.flatMap { Int($0) })
    }

    /// Redis killed for 3 s (longer than the 1.5 s lease) while payments run, restarted with its
    /// data (`appendonly`, `appendfsync always`); 80 pairs per round, 5 rounds, each pair paid
    /// by a client on each instance: one charge id per pair, one charge per pair at the
    /// processor.
    @Test func aStoreOutageLongerThanTheLeaseChargesOncePerPair() async throws {
        let store = try await RedisServerProcess.start(persistent: true)
        defer { store.stop() }
        let ledger = try await RedisServerProcess.start()
        defer { ledger.stop() }
        let options = [
            "--pay-latency-ms", "400", "--pay-lease-ms", "1500", "--processor-ledger", ledger.url(), "--redis-timeout-ms", "500",
        ]
        let a = try await Instance(redis: store, options)
        defer { a.stop() }
        let b = try await Instance(redis: store, options)
        defer { b.stop() }
        let tally = Tally()
        let pairs = 80
        let rounds = 5
        for round in 0..<rounds {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for pair in 0..<pairs {
                    for instance in [a, b] {
                        group.addTask {
                            try await Self.payUntilCharged(instance, account: "acct\(pair % 16)", idem: "r\(round)-\(pair)", tally: tally)
                        }
                    }
                }
                group.addTask {
                    // Redis goes down once payments of the round run (their records exist), and
                    // stays down 3 s: the fault's length, twice the lease, not a wait for
                    // anything.
                    try await pollUntil { try await Self.records(in: store, matching: "r\(round)-*") > 0 }
                    store.kill()
                    try await Task.sleep(for: .seconds(3))
                    try await store.restart()
                }
                try await group.waitForAll()
            }
        }
        let charges = tally.charges
        #expect(charges.count == pairs * rounds)
        #expect(charges.values.allSatisfy { $0.count == 1 }, "a pair got two charge ids")
        #expect(tally.replies.contains { $0.hasSuffix("ERR unavailable") }, "the outage was not felt")
        #expect(try await a.payments() + b.payments() == pairs * rounds)
        #expect(try await Self.ledgerEntries(ledger) == pairs * rounds)
    }

    /// The owner stopped (SIGSTOP) at the commit point of a 3 s payment, before its commit guard,
    /// for 3 s, past its 900 ms lease, while a client of the other instance retries: one charge,
    /// and both clients (each retrying on its own instance) hold its id. With the ledger, and
    /// without it (each instance's processor keeps its own, so only the commit guard stands
    /// between the woken owner and a second charge).
    @Test(.enabled(if: ChildProcess.canSeeStops, "needs /proc to see the owner stopped"), arguments: [true, false])
    func anOwnerStoppedPastItsLeaseChargesOnce(ledger withLedger: Bool) async throws {
        let store = try await RedisServerProcess.start()
        defer { store.stop() }
        let ledger = try await RedisServerProcess.start()
        defer { ledger.stop() }
        let options =
            ["--pay-latency-ms", "3000", "--pay-lease-ms", "900"]
            + (withLedger ? ["--processor-ledger", ledger.url()] : [])
        let a = try await Instance(redis: store, options + ["--pay-stop-before-commit"])
        defer { a.stop() }
        let b = try await Instance(redis: store, options)
        defer { b.stop() }
        let ownerTally = Tally()
        let otherTally = Tally()
        let owner = Task {
            try await Self.payUntilCharged(a, account: "acct", idem: "stopped", amount: 25, tally: ownerTally, seconds: 30)
        }
        // The owner stops itself with its payment due and its guard not yet asked: however late
        // this task runs, the stop comes after the effect started and before its commit point.
        try await pollUntil(seconds: 30) { a.process.isStopped }
        let other = Task {
            try await Self.payUntilCharged(b, account: "acct", idem: "stopped", amount: 25, tally: otherTally, seconds: 30)
        }
        // How long the owner stays stopped (past its 900 ms lease): a lower bound, not an order.
        try await Task.sleep(for: .seconds(3))
        a.process.signal(SIGCONT)
        try await other.value
        try await owner.value
        let ownerCharges = ownerTally.charges["acct/stopped"] ?? []
        let otherCharges = otherTally.charges["acct/stopped"] ?? []
        #expect(ownerCharges.count == 1 && ownerCharges == otherCharges, "\(ownerTally.replies) / \(otherTally.replies)")
        // The woken owner answered with the other instance's charge (or told its client to
        // retry): never a charge of its own.
        let ownerFirst = ownerTally.replies.first ?? ""
        #expect(
            ownerFirst.hasSuffix("replayed=true") || ownerFirst.hasSuffix("ERR conflict") || ownerFirst.hasSuffix("ERR unavailable"),
            "\(ownerFirst)")
        #expect(try await a.payments() + b.payments() == 1)
        if withLedger { #expect(try await Self.ledgerEntries(ledger) == 1) }
    }

    /// Redis restarted empty (no persistence) while 10 payments run, and 10 completed before
    /// are retried after it: the ledger keeps one charge per pair, every retry settles with
    /// that charge (the new owners' fences are newer, never refused as stale), and the replies
    /// say that the store lost its data.
    @Test func aStoreRestartedEmptyChargesOncePerPairAndSaysSo() async throws {
        let store = try await RedisServerProcess.start()
        defer { store.stop() }
        let ledger = try await RedisServerProcess.start()
        defer { ledger.stop() }
        let options = ["--pay-latency-ms", "1000", "--pay-lease-ms", "1500", "--processor-ledger", ledger.url()]
        let a = try await Instance(redis: store, options)
        defer { a.stop() }
        let b = try await Instance(redis: store, options)
        defer { b.stop() }
        let tally = Tally()
        // Both instances claim before the loss, so both know the store's epoch.
        for index in 0..<10 {
            try await Self.payUntilCharged(index % 2 == 0 ? a : b, account: "acct", idem: "done-\(index)", tally: tally)
        }
        let running = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<10 {
                    group.addTask { try await Self.payUntilCharged(a, account: "acct", idem: "running-\(index)", tally: tally) }
                }
                try await group.waitForAll()
            }
        }
        // Redis loses its data while the ten run: once all of them hold their records.
        try await pollUntil { try await Self.records(in: store, matching: "running-*") == 10 }
        try await store.restart()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<10 {
                for instance in [a, b] {
                    group.addTask { try await Self.payUntilCharged(instance, account: "acct", idem: "done-\(index)", tally: tally) }
                    group.addTask { try await Self.payUntilCharged(instance, account: "acct", idem: "running-\(index)", tally: tally) }
                }
            }
            try await group.waitForAll()
        }
        try await running.value
        let charges = tally.charges
        #expect(charges.count == 20)
        #expect(charges.values.allSatisfy { $0.count == 1 }, "a pair got two charge ids: \(charges)")
        #expect(try await a.payments() + b.payments() == 20)
        #expect(try await Self.ledgerEntries(ledger) == 20)
        let told = tally.replies.filter { $0.hasSuffix("guarantee=store-data-lost") }
        #expect(told.count >= 20, "replies after the loss should say so: \(told.count)")
        // A new payment on either instance says so too, for the retention that follows.
        for instance in [a, b] {
            let reply = try await instance.send("PAY acct after-\(instance.port) 10")
            #expect(reply.hasSuffix(" guarantee=store-data-lost"), "\(reply)")
        }
    }
}
