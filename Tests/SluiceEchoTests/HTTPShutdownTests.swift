import Foundation
import SluiceLibevent
import SluiceTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `sluice-echo` itself, started as a process: its SIGTERM path over HTTP.
@Suite struct HTTPShutdownTests {
    /// The `sluice-echo` built beside this test bundle.
    static var echoServerURL: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("sluice-echo")
    }

    /// What one request of the storm got.
    struct Exchange: Sendable {
        let key: String
        let idem: String
        let sentBeforeSignal: Bool
        let response: HTTPTestClient.Response?
    }

    /// What the storm's connections share.
    final class Storm: Sendable {
        /// Whether SIGTERM was sent. A client reads it and sends its request under the same lock,
        /// and the signal is sent under it: a request counted as sent before the signal was
        /// written before it (a client preempted between the two cannot count one it sent late).
        let signalled = Mutex<Bool>(false)
        let answered = Atomic<Int>(0)
        let exchanges = Mutex<[Exchange]>([])
    }

    @Test func sigtermDuringAPayStormAnswersEveryAcceptedPaymentOnce() async throws {
        // `swift test` builds the package's executables beside the test bundle.
        try #require(FileManager.default.isExecutableFile(atPath: Self.echoServerURL.path))
        // `--http-port 0` turns HTTP off: pick a free port.
        let freePort = try #require(freeLoopbackPort())
        let process = try ChildProcess(
            Self.echoServerURL.path,
            [
                "--port", "0", "--http-port", String(freePort), "--loops", "2", "--pay-latency-ms", "200",
                "--drain-timeout-s", "10",
            ],
            captureErrorOutput: true)
        defer { process.stop() }
        let errors = try #require(process.errorOutput)
        let port = try await Self.httpPort(from: errors)

        // Decisions are exported before the storm.
        let probe = try HTTPTestClient(port: port)
        #expect(try await probe.request("POST", "/tap/warm").status == 200)
        let metrics = try await probe.request("GET", "/metrics")
        #expect(metrics.text.contains(#"sluice_decisions_total{plugin="tap",outcome="executed"} 1"#), "\(metrics.text.prefix(400))")

        let storm = Storm()
        let connections = 16
        try await withThrowingTaskGroup(of: Void.self) { group in
            for connection in 0..<connections {
                let client = try HTTPTestClient(port: port)
                group.addTask {
                    var sequence = 0
                    while true {
                        // Pairs repeat across connections: every pair is sent about twice.
                        let pair = (sequence * connections + connection) / 2
                        sequence += 1
                        let key = "acct\(pair % 8)"
                        let idem = "storm-\(pair)"
                        var before = false
                        let response: HTTPTestClient.Response?
                        do {
                            try storm.signalled.withSanitizedLock { signalled in
                                before = !signalled
                                try client.send(
                                    "POST", "/pay", fields: [("Idempotency-Key", "\"\(idem)\"")],
                                    body: #"{"key":"\#(key)","amount":\#(pair % 50 + 1)}"#)
                            }
                            response = try await client.readResponse()
                        } catch {
                            response = nil
                        }
                        storm.exchanges.withSanitizedLock { $0.append(Exchange(key: key, idem: idem, sentBeforeSignal: before, response: response)) }
                        storm.answered.add(1, ordering: .relaxed)
                        if response == nil || response?.field("Connection") == "close" { return }
                    }
                }
            }
            try await pollUntil { storm.answered.load(ordering: .relaxed) >= 3 * connections }
            storm.signalled.withSanitizedLock { signalled in
                signalled = true
                process.signal(SIGTERM)
            }
            try await group.waitForAll()
        }

        #expect(try await process.waitForExit(seconds: 20) == .exited(0))

        let all = storm.exchanges.withSanitizedLock { $0 }
        let accepted = all.filter(\.sentBeforeSignal)
        #expect(accepted.count >= 3 * connections)
        // Every payment sent before the signal got exactly one answer, a legitimate one.
        for exchange in accepted {
            let status = exchange.response?.status
            #expect(status.map { [201, 409, 503].contains($0) } == true, "\(exchange.key)/\(exchange.idem): \(String(describing: exchange.response))")
        }
        // Exactly one charge per pair answered 201: every 201 of a pair carries the same charge.
        var chargesByPair: [String: Set<String>] = [:]
        var charges = Set<String>()
        for exchange in all {
            guard let response = exchange.response, response.status == 201 else { continue }
            let charge = String(response.text.split(separator: "\"")[3])
            chargesByPair["\(exchange.key)/\(exchange.idem)", default: []].insert(charge)
            charges.insert(charge)
        }
        #expect(!chargesByPair.isEmpty)
        #expect(chargesByPair.values.allSatisfy { $0.count == 1 })
        #expect(charges.count == chargesByPair.count)
        let stderr = try await errors.waitForEnd()
        #expect(errors.sanitizerReports.isEmpty, "\(errors.sanitizerReports)")
        #expect(stderr.contains("drained"), "\(stderr.suffix(600))")
    }

    /// Reads the server's log until it says where HTTP listens.
    static func httpPort(from output: CapturedOutput) async throws -> Int {
        try await output.waitForPort(listening: "listening (HTTP)")
    }
}
