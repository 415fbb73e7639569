import Foundation
import SluiceTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A second `sluice-echo` on a port another one serves (a forgotten server on 8080) stops with an
/// error naming the port, for the line port and for the HTTP port; with `--reuse-port` on both,
/// the second starts and shares it.
@Suite struct PortOwnershipTests {
    static func start(_ arguments: [String]) throws -> ChildProcess {
        try #require(FileManager.default.isExecutableFile(atPath: HTTPShutdownTests.echoServerURL.path))
        return try ChildProcess(HTTPShutdownTests.echoServerURL.path, ["--loops", "2"] + arguments, captureErrorOutput: true)
    }

    @Test func aSecondServerOnATakenPortExitsWithAClearMessage() async throws {
        // `--http-port 0` turns HTTP off: the HTTP port is one probed free. The log says where
        // the first listens, or (when it cannot) why it stopped.
        let first = try Self.start(["--port", "0", "--http-port", String(try #require(freeLoopbackPort()))])
        defer { first.stop() }
        let firstOutput = try #require(first.errorOutput)
        let line = try await firstOutput.waitForPort(listening: "[SluiceLineProtocol] listening")
        let http = try await firstOutput.waitForPort(listening: "listening (HTTP)")
        for (taken, arguments) in [
            (line, ["--port", String(line), "--http-port", "0"]),
            (http, ["--port", "0", "--http-port", String(http)]),
        ] {
            let second = try Self.start(arguments)
            defer { second.stop() }
            let termination = try await second.waitForExit(seconds: 20)
            #expect(termination != .exited(0), "a second server started on port \(taken)")
            let output = try await #require(second.errorOutput).waitForEnd()
            #expect(output.contains("port \(taken) is already served by another socket"), "\(output)")
        }
        // The first still serves.
        let client = try LineClient(port: line)
        try client.send("1 PING\n")
        #expect(try await client.readLine() == "1 PONG")
    }

    @Test func bothServersWithReusePortShareThePort() async throws {
        let first = try Self.start(["--port", "0", "--http-port", "0", "--reuse-port"])
        defer { first.stop() }
        let line = try await #require(first.errorOutput).waitForPort(listening: "[SluiceLineProtocol] listening")
        let second = try Self.start(["--port", String(line), "--http-port", "0", "--reuse-port"])
        defer { second.stop() }
        // It binds (no error) and keeps running, and connections are served.
        _ = try await #require(second.errorOutput).waitForLine(containing: "listening")
        #expect(second.isRunning)
        for _ in 0..<8 {
            let client = try LineClient(port: line)
            try client.send("1 PING\n")
            #expect(try await client.readLine() == "1 PONG")
        }
        #expect(first.terminateAndWait() == .exited(0))
        #expect(second.terminateAndWait() == .exited(0))
    }
}
