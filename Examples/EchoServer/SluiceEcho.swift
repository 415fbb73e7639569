import ArgumentParser
import Logging
import ServiceLifecycle
import UnixSignals
import Sluice

/// `sluice-echo`: the example server. Reads lines over TCP on a libevent loop group and echoes
/// each one back.
@main
struct SluiceEcho: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sluice-echo",
        abstract: "The Sluice example server: line-based TCP on libevent loops."
    )

    @Option(help: "The address to listen on (an IP literal or localhost).")
    var host = "127.0.0.1"

    @Option(help: "The TCP port to listen on (0 picks a free one).")
    var port = 7070

    @Option(help: "How many event loops (threads) to run; default: one per core.")
    var loops: Int = EventLoopGroup.coreCount

    @Option(name: .customLong("max-line"), help: "The longest request line accepted, in bytes.")
    var maxLine = 8192

    @Option(name: .customLong("idle-timeout-s"), help: "Close a connection that sends nothing for this many seconds (0: never).")
    var idleTimeoutSeconds = 300

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        guard loops >= 1 else { throw ValidationError("--loops must be at least 1 (got \(loops))") }
        guard idleTimeoutSeconds >= 0 else { throw ValidationError("--idle-timeout-s must be 0 or more (got \(idleTimeoutSeconds))") }
        let configuration = tcpConfiguration
        do {
            try configuration.validate()
        } catch {
            throw ValidationError(error.message + " (got \(error.input))")
        }
    }

    var tcpConfiguration: TCPConfiguration {
        TCPConfiguration(
            host: host, port: port, maximumLineLength: maxLine,
            idleTimeout: idleTimeoutSeconds == 0 ? nil : .seconds(idleTimeoutSeconds))
    }

    func run() async throws {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "sluice-echo")
        let group = try EventLoopGroup(loopCount: loops, namePrefix: "echo-loop")
        let service = LineServerService(group: group, configuration: tcpConfiguration, logger: logger) { _ in
            EchoHandler()
        }
        let serviceGroup = ServiceGroup(
            services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await serviceGroup.run()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
