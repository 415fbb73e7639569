import SluiceCore
import SluiceLibevent

/// How a line front cuts a connection's bytes into lines, and how long a line may take.
///
/// The transport (`TCPConnection`) carries bytes with its bounds and backpressure; lines are the
/// line front's: ``LineFramer`` cuts them, and a line begun must complete within
/// ``lineTimeout`` of its first byte.
public struct LineFraming: Sendable, Hashable {
    /// The longest line accepted, in bytes, CR and LF not counted; a longer one is reported and
    /// skipped up to its LF, and the connection stays usable.
    public var maximumLineLength: Int
    /// A line must be complete (its LF arrived) within this long of its first byte, or the
    /// connection is closed: progress counts, not bytes, so a peer trickling a byte at a time
    /// cannot hold a connection. Time a connection spends paused (its replies not read, or
    /// its requests in flight at their cap) does not count. `nil` sets no limit.
    public var lineTimeout: Duration?

    /// Framing with the defaults of `sluice-echo`: lines of at most 8 KiB, each within 10 s.
    public init(maximumLineLength: Int = 8192, lineTimeout: Duration? = .seconds(10)) {
        self.maximumLineLength = maximumLineLength
        self.lineTimeout = lineTimeout
    }

    /// Checks both fields, and that a connection configured with `tcp` can hold a whole line.
    ///
    /// - Throws: `SluiceError` with code `.invalidOption` naming the field out of range.
    public func validate(for tcp: TCPConfiguration) throws(SluiceError) {
        guard maximumLineLength >= 1 else {
            throw SluiceError(code: .invalidOption, message: "maximumLineLength must be at least 1", value: "\(maximumLineLength)")
        }
        if let lineTimeout, lineTimeout <= .zero {
            throw SluiceError(code: .invalidOption, message: "lineTimeout must be positive", value: "\(lineTimeout)")
        }
        guard tcp.maximumBufferedInput >= maximumLineLength + 2 else {
            throw SluiceError(
                code: .invalidOption, message: "maximumBufferedInput must hold a line of maximumLineLength with its CR and LF",
                value: "\(tcp.maximumBufferedInput)")
        }
    }
}
