import Foundation
import SluiceTestSupport
import Testing

/// `sluice-echo` refuses at start-up a PAY chain its flags do not describe: a shape of the
/// per-account rate without the rate, and values out of range, each with a message naming the
/// flag.
@Suite struct PayChainFlagTests {
    @Test(arguments: [
        (["--pay-burst", "2"], "--pay-period-ms and --pay-burst shape --pay-rate, which is not set"),
        (["--pay-period-ms", "60000"], "--pay-period-ms and --pay-burst shape --pay-rate, which is not set"),
        (["--pay-rate", "0"], "--pay-rate must be at least 1 (got 0)"),
        (["--pay-rate", "1", "--pay-period-ms", "0"], "--pay-period-ms must be at least 1 (got 0)"),
        (["--pay-rate", "1", "--pay-burst=-1"], "--pay-burst must be 0 or more (got -1)"),
        (["--pay-concurrency", "0"], "--pay-concurrency must be at least 1 (got 0)"),
    ])
    func aChainTheFlagsDoNotDescribeIsRefused(arguments: [String], message: String) async throws {
        let server = try PortOwnershipTests.start(["--port", "0", "--http-port", "0"] + arguments)
        defer { server.stop() }
        let termination = try await server.waitForExit(seconds: 20)
        #expect(termination != .exited(0), "started with \(arguments)")
        let output = try await #require(server.errorOutput).waitForEnd()
        #expect(output.contains(message), "\(output)")
    }

    @Test func theRateWithItsShapeStarts() async throws {
        let server = try PortOwnershipTests.start(
            ["--port", "0", "--http-port", "0", "--pay-rate", "2", "--pay-period-ms", "60000", "--pay-burst", "1"])
        defer { server.stop() }
        _ = try await #require(server.errorOutput).waitForLine(containing: "listening")
        #expect(server.isRunning)
        #expect(server.terminateAndWait() == .exited(0))
    }
}
