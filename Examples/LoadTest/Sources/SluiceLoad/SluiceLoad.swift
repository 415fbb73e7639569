import ArgumentParser
import Foundation
import SluiceLoadCore

/// `sluice-load`: drives `sluice-echo` (its line protocol, or its HTTP front with `--http`, or a
/// line echo baseline) and reports throughput, latency percentiles and the correctness checks.
/// Exits non-zero when a check fails.
@main
struct SluiceLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sluice-load",
        abstract: "Load tester for sluice-echo's line protocol, its HTTP front (--http), and verbatim line echo servers (--raw-echo).",
        discussion: """
            Closed loop by default (--depth requests in flight per connection); --rate makes it \
            open loop, with latency measured from each request's intended send time. Prints a \
            progress line each second, then a table per verb and status, throughput, latency \
            percentiles and the correctness checks; exits 1 when a check fails. With --http the \
            same mix and checks run over HTTP/1.1 keep-alive connections to the HTTP port \
            (one request at a time per connection unless --depth pipelines more).
            """
    )

    @OptionGroup var options: LoadOptions

    func run() async throws {
        let configuration: LoadConfiguration
        do {
            configuration = try options.configuration()
        } catch {
            throw ValidationError(error.description)
        }
        let quiet = options.quiet
        let result = try await LoadRunner.run(configuration) { sample in
            if !quiet { FileHandle.standardError.write(Data((sample.line + "\n").utf8)) }
        }
        print(result.report, terminator: "")
        if let path = options.json {
            try result.json().write(to: URL(fileURLWithPath: path))
        }
        if !result.passed {
            throw ExitCode(1)
        }
    }
}
