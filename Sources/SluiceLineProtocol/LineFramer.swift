/// Splits a byte stream into LF-terminated lines (a CR right before the LF is dropped).
///
/// A line whose content is longer than `maximumLineLength` bytes is reported once as
/// ``Event/overlong`` and skipped up to its LF, so the stream stays usable. The framer holds no
/// buffer of its own: the caller feeds it the bytes it has, and it says how many it consumed;
/// unconsumed bytes (an incomplete line) must be fed again with more data behind them.
public struct LineFramer: Sendable {
    /// What the framer found.
    public enum Event {
        /// A complete line, without its LF and without a CR right before the LF. The bytes are
        /// valid only during the callback.
        case line(UnsafeRawBufferPointer)
        /// A line longer than the maximum; its bytes up to the next LF are skipped.
        case overlong
    }

    /// The longest line content accepted, in bytes (CR and LF not counted).
    public let maximumLineLength: Int

    /// Whether the framer is skipping the rest of an overlong line.
    public private(set) var isSkipping = false

    /// The fewest bytes that prove the current line is overlong: the content, a CR and one byte
    /// more, with no LF among them.
    public var overlongThreshold: Int { maximumLineLength + 2 }

    /// Creates a framer. `maximumLineLength` must be at least 1.
    public init(maximumLineLength: Int) {
        precondition(maximumLineLength >= 1, "maximumLineLength must be at least 1")
        self.maximumLineLength = maximumLineLength
    }

    /// Feeds `bytes`; calls `onEvent` for each line or overlong line found, in order, until it
    /// returns `false`. Returns how many bytes were consumed (always a prefix of `bytes`).
    public mutating func consume(
        _ bytes: UnsafeRawBufferPointer,
        _ onEvent: (Event) -> Bool
    ) -> Int {
        var start = 0
        let count = bytes.count
        while start < count {
            let newline = bytes.firstNewline(from: start)
            guard let newline else {
                if isSkipping {
                    return count
                }
                if count - start >= overlongThreshold {
                    isSkipping = true
                    _ = onEvent(.overlong)
                    return count
                }
                return start
            }
            let lineStart = start
            start = newline + 1
            if isSkipping {
                isSkipping = false
                continue
            }
            var end = newline
            if end > lineStart && bytes[end - 1] == UInt8(ascii: "\r") {
                end -= 1
            }
            let keepGoing: Bool
            if end - lineStart > maximumLineLength {
                keepGoing = onEvent(.overlong)
            } else {
                keepGoing = onEvent(.line(UnsafeRawBufferPointer(rebasing: bytes[lineStart..<end])))
            }
            if !keepGoing { return start }
        }
        return start
    }
}

extension UnsafeRawBufferPointer {
    /// The index of the first LF at or after `start`.
    func firstNewline(from start: Int) -> Int? {
        guard start < count, let base = baseAddress else { return nil }
        guard let found = memchr(base + start, 0x0A, count - start) else { return nil }
        return UnsafeRawPointer(found) - base
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
