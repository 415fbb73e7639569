import Sluice
import SluiceFronts
import SluiceCore
import SluiceLibevent

/// How an ``HTTPFront`` listens, what it accepts, and its own `/echo` limit.
public struct HTTPFrontConfiguration: Sendable, Hashable {
    /// The address, the size caps and the timeouts of the connections.
    public var http: HTTPConfiguration
    /// `/echo` requests per second per connection, sustained.
    public var echoRate: Int
    /// `/echo` requests a connection may send back to back.
    public var echoBurst: Int

    /// A configuration with the defaults of `sluice-echo`.
    public init(http: HTTPConfiguration = HTTPConfiguration(), echoRate: Int = 10_000, echoBurst: Int = 1_000) {
        self.http = http
        self.echoRate = echoRate
        self.echoBurst = echoBurst
    }

    /// The GCRA options of `/echo`.
    public func echoLimit() throws(SluiceError) -> RateLimitOptions {
        try .echo(rate: echoRate, burst: echoBurst)
    }

    /// Checks every option.
    public func validate() throws(SluiceError) {
        try http.validate()
        _ = try echoLimit()
    }
}
