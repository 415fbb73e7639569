import SluiceCore
import SluiceLibevent

/// How a ``GateServer`` listens and shapes the verbs it answers itself.
public struct GateConfiguration: Sendable, Hashable {
    /// Sockets, line length, watermarks, idle timeout.
    public var tcp: TCPConfiguration
    /// `ECHO` lines allowed per second per connection (GCRA, sustained).
    public var echoRate: Int
    /// `ECHO` lines a connection may send back to back before the rate applies.
    public var echoBurst: Int
    /// How long a graceful shutdown waits for running effects (payments) to finish.
    public var shutdownGracePeriod: Duration

    /// The configuration `sluice-echo` starts with.
    public init(
        tcp: TCPConfiguration = TCPConfiguration(),
        echoRate: Int = 10_000,
        echoBurst: Int = 1_000,
        shutdownGracePeriod: Duration = .seconds(5)
    ) {
        self.tcp = tcp
        self.echoRate = echoRate
        self.echoBurst = echoBurst
        self.shutdownGracePeriod = shutdownGracePeriod
    }

    /// The per-connection `ECHO` limit: at most `echoBurst` back to back, `echoRate` per second.
    public func echoLimit() throws(GateError) -> RateLimitOptions {
        guard echoRate >= 1 else {
            throw GateError(code: .invalidConfiguration, message: "the echo rate must be at least 1 per second", value: "\(echoRate)")
        }
        guard echoBurst >= 1 else {
            throw GateError(code: .invalidConfiguration, message: "the echo burst must be at least 1", value: "\(echoBurst)")
        }
        do {
            // GCRA's burst counts the requests beyond the first (redis-cell's max_burst).
            return try RateLimitOptions(count: echoRate, per: .seconds(1), burst: echoBurst - 1)
        } catch {
            throw GateError(code: .invalidConfiguration, message: error.message, value: "\(echoRate)/s burst \(echoBurst)")
        }
    }

    /// Checks every option.
    public func validate() throws(GateError) {
        do {
            try tcp.validate()
        } catch {
            throw GateError(code: .invalidConfiguration, message: error.message, value: error.input)
        }
        _ = try echoLimit()
        guard shutdownGracePeriod >= .zero else {
            throw GateError(code: .invalidConfiguration, message: "the shutdown grace period cannot be negative", value: "\(shutdownGracePeriod)")
        }
    }
}
