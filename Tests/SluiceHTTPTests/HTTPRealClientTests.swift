import Foundation
import SluiceHTTP
import SluiceLibevent
import SluiceTestSupport
import Testing

/// The HTTP front as a real client sees it: `Tests/HTTPClient/check_answers.py` talks to it with
/// h11 (a strict HTTP/1.1 implementation nobody here wrote) parsing every response: statuses,
/// problem bodies, `Date`, `Connection: close` and the closing itself, pipelining, chunked
/// bodies, `100 Continue`, and each refusal of the parser (400, 408, 413, 431, 501).
@Suite struct HTTPRealClientTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("HTTPClient/check_answers.py").path

    @Test func everyAnswerReadsRightToAStrictClient() async throws {
        try await withHTTPServer(configure: {
            $0.http.maximumHeadBytes = 1024
            $0.http.maximumBodyBytes = 100
            $0.http.headTimeout = .milliseconds(300)
        }) { server in
            let python = try #require(ChildProcess.executable(named: "python3"), "python3 is not installed")
            // The script's timeout only detects a hang: scaled as this test's own deadlines are.
            let process = try ChildProcess(
                python, [Self.script, String(server.port), String(20 * deadlineScale)], captureStandardOutput: true)
            defer { process.stop() }
            let termination = try await process.waitForExit(seconds: 60)
            let output = try #require(process.errorOutput)
            let text = try await output.waitForEnd()
            #expect(termination == .exited(0), "\(text)")
        }
    }
}
