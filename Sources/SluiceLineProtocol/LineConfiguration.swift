import Sluice
import SluiceFronts

/// How a ``LineServer`` listens, and the limits of the verbs it answers itself.
public struct LineConfiguration: Sendable, Hashable {
    /// Sockets, watermarks, idle timeout, turns.
    public var tcp: TCPConfiguration
    /// The longest line and how long a line may take.
    public var framing: LineFraming
    /// `ECHO` lines allowed per second per connection (GCRA, sustained).
    public var echoRate: Int
    /// `ECHO` lines a connection may send back to back before the rate applies.
    public var echoBurst: Int
    /// Requests of one connection whose replies are still to come (they wait for an effect, a
    /// debounce or another loop). At the cap the connection stops reading; it reads again
    /// once a reply has been written.
    public var maximumInFlight: Int

    /// The configuration `sluice-echo` starts with.
    public init(
        tcp: TCPConfiguration = TCPConfiguration(), framing: LineFraming = LineFraming(), echoRate: Int = 10_000,
        echoBurst: Int = 1_000, maximumInFlight: Int = 128
    ) {
        self.tcp = tcp
        self.framing = framing
        self.maximumInFlight = maximumInFlight
        self.echoRate = echoRate
        self.echoBurst = echoBurst
    }

    /// The per-connection `ECHO` limit: at most `echoBurst` back to back, `echoRate` per second.
    public func echoLimit() throws(SluiceError) -> RateLimitOptions {
        try .echo(rate: echoRate, burst: echoBurst)
    }

    /// Checks every option.
    public func validate() throws(SluiceError) {
        try tcp.validate()
        try framing.validate(for: tcp)
        _ = try echoLimit()
        guard maximumInFlight >= 1 else {
            throw SluiceError(
                code: .invalidOption, message: "the requests in flight per connection must be at least 1",
                value: "\(maximumInFlight)")
        }
    }
}
