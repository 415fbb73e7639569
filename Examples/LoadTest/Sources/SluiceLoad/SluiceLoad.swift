import ArgumentParser
import Foundation
import SluiceLoadCore

/// `sluice-load`: drives `sluice-echo` (or a line echo baseline) and reports throughput,
/// latency percentiles and the correctness checks. Exits non-zero when a check fails.
@main
struct SluiceLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sluice-load",
        abstract: "Load tester for sluice-echo's line protocol (and verbatim line echo servers with --raw-echo).",
        discussion: """
            Closed loop by default (--depth requests in flight per connection); --rate makes it \
            open loop, with latency measured from each request's intended send time. Prints a \
            progress line each second, then a table per verb and status, throughput, latency \
            percentiles and the correctness checks; exits 1 when a check fails.
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
