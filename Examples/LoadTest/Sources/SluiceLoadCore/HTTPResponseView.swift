/// One HTTP/1.1 response as slices of the received bytes, handed out by
/// ``HTTPResponseParser``: valid only while those bytes are (during the callback that gets it).
///
/// The head has been validated when a view exists; header fields are looked up by name
/// (case-insensitive) on demand, so a response costs no allocation.
public struct HTTPResponseView {
    /// The status code, 100…599.
    public var status: Int
    /// The minor HTTP version: 1 for `HTTP/1.1`, 0 for `HTTP/1.0`.
    public var minorVersion: Int
    /// The reason phrase (possibly empty).
    public var reason: UnsafeRawBufferPointer
    /// The header lines (each ended by LF or CR LF), without the status line and without the
    /// blank line that ends the head.
    public var fields: UnsafeRawBufferPointer
    /// The body: exactly `Content-Length` bytes (none for 204 and 304).
    public var body: UnsafeRawBufferPointer
    /// Whether the server closes the connection after this response: `Connection: close`, or
    /// HTTP/1.0 without `Connection: keep-alive`. No request may follow on the connection.
    public var closesConnection: Bool

    /// The value of the first header field called `name` (compared case-insensitively), with
    /// the whitespace around it removed; `nil` when there is none.
    public func field(_ name: String) -> UnsafeRawBufferPointer? {
        var found: UnsafeRawBufferPointer?
        HTTPResponseView.forEachField(in: fields) { fieldName, value in
            guard found == nil, HTTPResponseView.equalsIgnoringCase(fieldName, name) else { return }
            found = value
        }
        return found
    }

    /// ``field(_:)`` as text (UTF-8, invalid bytes replaced).
    public func fieldText(_ name: String) -> String? {
        field(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether field `name` holds `value`, compared case-insensitively.
    public func field(_ name: String, is value: String) -> Bool {
        guard let found = field(name) else { return false }
        return HTTPResponseView.equalsIgnoringCase(found, value)
    }

    /// The body as text (UTF-8, invalid bytes replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// Calls `body` with the name and the trimmed value of every header line of `fields`,
    /// which ``HTTPResponseParser`` has validated (each line holds a colon).
    static func forEachField(
        in fields: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void
    ) {
        var start = 0
        while start < fields.count {
            let newline = fields.firstLineFeed(from: start) ?? fields.count
            var end = newline
            if end > start && fields[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let line = UnsafeRawBufferPointer(rebasing: fields[start..<end])
            if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                body(UnsafeRawBufferPointer(rebasing: line[..<colon]), trimmed(UnsafeRawBufferPointer(rebasing: line[(colon + 1)...])))
            }
            start = newline + 1
        }
    }

    /// `bytes` without leading and trailing spaces and tabs.
    static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var lower = 0
        var upper = bytes.count
        while lower < upper && (bytes[lower] == 0x20 || bytes[lower] == 0x09) { lower += 1 }
        while upper > lower && (bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09) { upper -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[lower..<upper])
    }

    /// Whether `bytes` spell `text`, ASCII letters compared case-insensitively.
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ text: String) -> Bool {
        let utf8 = text.utf8
        guard bytes.count == utf8.count else { return false }
        return zip(bytes, utf8).allSatisfy { lowercased($0) == lowercased($1) }
    }

    /// An ASCII letter in lower case; any other byte as it is.
    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}
