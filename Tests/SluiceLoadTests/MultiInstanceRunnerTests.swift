import ArgumentParser
import Foundation
import SluiceLibevent
import SluiceLoadCore
import Synchronization
import Testing

@Suite("sluice-load against several in-test instances", .serialized)
struct MultiInstanceRunnerTests {
    static let lineCheck = "PAY charges (STATS) = (key, idem) pairs answered OK"

    /// Runs `arguments` against two line-protocol fakes, `first` and `second`.
    static func run(
        _ first: FakeProtocolServer, _ second: FakeProtocolServer, _ arguments: [String]
    ) async throws -> (result: LoadResult, ports: [Int]) {
        var outcome: (LoadResult, [Int])?
        try await withFakeServer(first) { firstPort in
            try await withFakeServer(second) { secondPort in
                let configuration = try LoadConfiguration.validated(
                    ["--port", "\(firstPort),\(secondPort)", "--drain-timeout", "10s"] + arguments)
                outcome = (try await LoadRunner.run(configuration), [firstPort, secondPort])
            }
        }
        return try #require(outcome)
    }

    @Test("instances sharing one store: connections spread round-robin, charges summed over them = pairs")
    func sharedStore() async throws {
        let store = FakeChargeStore()
        let first = FakeProtocolServer(fault: .none, store: store)
        let second = FakeProtocolServer(fault: .none, store: store)
        let (result, ports) = try await Self.run(
            first, second,
            ["--connections", "5", "--depth", "4", "--requests", "2000", "--mix", "echo=1,pay=3", "--dup-ratio", "0.5", "--loops", "2"])
        #expect(result.passed, "\(result.report)")
        #expect(first.loadConnections.load(ordering: .relaxed) == 3)
        #expect(second.loadConnections.load(ordering: .relaxed) == 2)
        #expect(result.outcome.instances.map(\.port) == ports)
        let firstCharges = first.ledger.withSanitizedLock { $0.payments }
        let secondCharges = second.ledger.withSanitizedLock { $0.payments }
        // Both instances charged, and together exactly once per pair.
        #expect(firstCharges > 0 && secondCharges > 0)
        #expect(firstCharges + secondCharges == result.ledger.uniquePairsSent)
        #expect(result.ledger.duplicatesSent > 0)
        #expect(result.report.contains("127.0.0.1:\(ports[0]),\(ports[1])  5 connections round-robin over 2 ports"), "\(result.report)")
        #expect(result.report.contains("port \(ports[0]): 3 connections, charges +\(firstCharges) declines +0"), "\(result.report)")
        #expect(result.report.contains("port \(ports[1]): 2 connections, charges +\(secondCharges) declines +0"), "\(result.report)")
        let payment = try #require(result.checks.first { $0.name == Self.lineCheck })
        #expect(payment.detail.contains("(\(ports[0]): \(firstCharges), \(ports[1]): \(secondCharges))"), "\(payment.detail)")
        let summary = try JSONDecoder().decode(LoadSummary.self, from: try result.json())
        #expect(summary.ports == ports)
        #expect(summary.port == ports[0])
        #expect(summary.instances.map(\.connections) == [3, 2])
        #expect(summary.instances.map(\.charges) == [firstCharges, secondCharges])
        #expect(summary.statsAfter?.payments == result.outcome.statsAfter?.payments)
    }

    @Test("instances without a shared store charge a duplicate again: the check, spanning them, fails")
    func independentInstances() async throws {
        let first = FakeProtocolServer(fault: .none)
        let second = FakeProtocolServer(fault: .none)
        // Two connections, one per instance: every duplicate (sent by the other connection) goes
        // to the other instance.
        let (result, _) = try await Self.run(
            first, second, ["--connections", "2", "--depth", "4", "--requests", "400", "--mix", "pay=1", "--dup-ratio", "0.5"])
        #expect(!result.passed)
        #expect(result.checks.filter { !$0.passed }.map(\.name) == [Self.lineCheck], "\(result.report)")
        let charged = first.ledger.withSanitizedLock { $0.payments } + second.ledger.withSanitizedLock { $0.payments }
        #expect(charged > result.ledger.uniquePairsSent)
        // Each instance alone charged each pair it saw once; only the two together show the
        // double charges, in the sum and in the pairs that got two charge ids.
        #expect(result.outcome.conflictingPairs > 0)
    }

    @Test("an instance that does not answer STATS fails the payment check, named by its port")
    func unprobedInstance() async throws {
        var silentPort = 0
        try await withFakeServer(FakeProtocolServer(fault: .none)) { port in
            // A verbatim line echo answers STATS with '0 STATS', which is not OK: no counters.
            try await withFakeServer(nil) { echoPort in
                silentPort = echoPort
                let configuration = try LoadConfiguration.validated(
                    ["--port", "\(port),\(echoPort)", "--drain-timeout", "300ms", "--connections", "2", "--requests", "20", "--mix", "pay=1"])
                let result = try await LoadRunner.run(configuration)
                let payment = try #require(result.checks.first { $0.name == Self.lineCheck })
                #expect(!payment.passed)
                #expect(payment.detail == "port \(silentPort): the server did not answer STATS before and after the run")
                #expect(result.report.contains("port \(silentPort): 1 connection, no STATS answer before and after the run"))
            }
        }
    }

    @Test("HTTP: connections spread over two instances, each addressed by its own port; /metrics summed")
    func http() async throws {
        let first = try FakeHTTPServer(fault: .none)
        defer { first.stop() }
        let second = try FakeHTTPServer(fault: .none)
        defer { second.stop() }
        // No duplicates: each pair goes to one instance only, so two independent instances
        // charge each once, and the sum over their /metrics must equal the pairs.
        let configuration = try LoadConfiguration.validated(
            ["--http", "--port", "\(first.port),\(second.port)", "--drain-timeout", "10s",
             "--connections", "3", "--requests", "600", "--mix", "echo=1,pay=1"])
        let result = try await LoadRunner.run(configuration)
        #expect(result.passed, "\(result.report)")
        #expect(first.loadConnections.load(ordering: .relaxed) == 2)
        #expect(second.loadConnections.load(ordering: .relaxed) == 1)
        #expect(first.misdirectedRequests.load(ordering: .relaxed) == 0)
        #expect(second.misdirectedRequests.load(ordering: .relaxed) == 0)
        #expect(result.outcome.instances.map(\.port) == [first.port, second.port])
        let payment = try #require(result.checks.first { $0.name.hasPrefix("PAY charges (/metrics)") })
        #expect(payment.detail.contains("(\(first.port): "), "\(payment.detail)")
        #expect(result.report.contains("port \(second.port): 1 connection, charges +"), "\(result.report)")
    }
}

extension LoadConfiguration {
    /// The configuration `arguments` describe, as the command builds it.
    static func validated(_ arguments: [String]) throws -> LoadConfiguration {
        try LoadOptions.parse(arguments).configuration()
    }
}
