import SluiceCore

/// The status and details of one reply line, as a codec writes them (the session adds the
/// request id before and the LF after).
///
/// A reply is one line: text that holds a CR or an LF would end it early and forge another
/// reply, so such text is refused, and the session answers `<id> ERR bad-reply` instead.
/// Numbers are written without allocating.
public struct LineReply: ~Copyable {
    private let builder: UnsafeMutablePointer<ReplyBuilder>
    /// Whether the codec tried to write a CR or an LF.
    public private(set) var isInvalid = false

    @usableFromInline
    init(_ builder: UnsafeMutablePointer<ReplyBuilder>) {
        self.builder = builder
    }

    /// Appends `text` (a literal: checked once, by the author).
    public mutating func append(_ text: StaticString) {
        builder.pointee.append(text)
    }

    /// Appends `text`, unless it holds a CR or an LF.
    public mutating func append(_ text: some StringProtocol) {
        let appended: Void? = text.utf8.withContiguousStorageIfAvailable { append(bytes: UnsafeRawBufferPointer($0)) }
        if appended == nil {
            var copy = String(text)
            copy.withUTF8 { append(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// Appends raw bytes, unless they hold a CR or an LF.
    public mutating func append(bytes: UnsafeRawBufferPointer) {
        if bytes.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            isInvalid = true
            return
        }
        builder.pointee.append(bytes)
    }

    /// Appends `value` in decimal.
    public mutating func append(_ value: Int) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: a sign and up to 20 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var magnitude = value.magnitude
            var position = buffer.count
            repeat {
                position -= 1
                buffer[position] = UInt8(truncatingIfNeeded: 0x30 &+ magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                position -= 1
                buffer[position] = UInt8(ascii: "-")
            }
            builder.pointee.append(UnsafeRawBufferPointer(rebasing: buffer[position...]))
        }
    }

    /// Appends `duration` in whole milliseconds, rounded up (a client that waits this long is in
    /// time).
    public mutating func append(milliseconds duration: Duration) {
        append(Int(duration.wholeMillisecondsRoundedUp))
    }

    /// Appends `true` or `false`.
    public mutating func append(_ value: Bool) {
        append(value ? "true" : "false" as StaticString)
    }
}

extension Duration {
    /// This duration in whole milliseconds, rounded up (a client that waits this long is in
    /// time).
    public var wholeMillisecondsRoundedUp: Int64 {
        let nanoseconds = nanosecondsClamped
        return nanoseconds <= 0 ? 0 : nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
    }
}
