/// One reply line of the line protocol, `<id> <STATUS> [<details>]`, parsed without copying.
///
/// `sluice-load` chooses decimal ids, so a reply's id is read as a number; an id that is not a
/// decimal number (or `-`, the id of a connection-level error) has ``id`` `nil`.
public struct ReplyLine: Sendable, Hashable {
    /// The request id, when it is a decimal number (as `sluice-load` sends them).
    public var id: UInt64?
    /// Whether the id was `-` (a reply to a line without a readable id).
    public var isConnectionError: Bool
    /// The status word, refined (see ``ReplyKind``).
    public var kind: ReplyKind
    /// The status word as received.
    public var status: String
    /// Everything after the status word and one space ("" when there is none).
    public var details: String

    public init(id: UInt64?, isConnectionError: Bool, kind: ReplyKind, status: String, details: String) {
        self.id = id
        self.isConnectionError = isConnectionError
        self.kind = kind
        self.status = status
        self.details = details
    }

    /// Parses a reply line (without its LF). Returns `nil` for a line with no space-separated
    /// status word.
    public init?(_ text: String) {
        var text = text
        guard let parsed = text.withUTF8({ ReplyLine(bytes: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses a reply line (without its LF) from raw bytes.
    public init?(bytes: UnsafeRawBufferPointer) {
        guard let fields = ReplyFields(bytes) else { return nil }
        self.id = fields.id
        self.isConnectionError = fields.isConnectionError
        self.kind = fields.kind
        self.status = String(decoding: fields.status, as: UTF8.self)
        self.details = String(decoding: fields.details, as: UTF8.self)
    }
}

/// The fields of a reply line as slices of the received bytes: the allocation-free form the
/// load connections use on the hot path. Valid only as long as the bytes are.
public struct ReplyFields {
    /// The id, when it is a decimal number that fits in 64 bits.
    public var id: UInt64?
    /// Whether the id was `-`.
    public var isConnectionError: Bool
    /// The refined status.
    public var kind: ReplyKind
    /// The status word.
    public var status: UnsafeRawBufferPointer
    /// The bytes after the status word and one space.
    public var details: UnsafeRawBufferPointer

    /// Splits `bytes` into id, status and details; `nil` when there is no status word.
    public init?(_ bytes: UnsafeRawBufferPointer) {
        guard let firstSpace = bytes.firstIndex(of: 0x20), firstSpace > 0 else { return nil }
        let idBytes = UnsafeRawBufferPointer(rebasing: bytes[..<firstSpace])
        isConnectionError = idBytes.count == 1 && idBytes[0] == UInt8(ascii: "-")
        id = ReplyFields.decimal(idBytes)
        let rest = UnsafeRawBufferPointer(rebasing: bytes[(firstSpace + 1)...])
        let statusEnd = rest.firstIndex(of: 0x20) ?? rest.count
        guard statusEnd > 0 else { return nil }
        status = UnsafeRawBufferPointer(rebasing: rest[..<statusEnd])
        details = statusEnd < rest.count ? UnsafeRawBufferPointer(rebasing: rest[(statusEnd + 1)...]) : UnsafeRawBufferPointer(rebasing: rest[rest.count...])
        kind = ReplyFields.kind(status: status, details: details)
    }

    /// The value of `name=` in the details (space-separated `name=value` fields), if present.
    public func field(_ name: StaticString) -> UnsafeRawBufferPointer? {
        ReplyFields.field(name, in: details)
    }

    static func field(_ name: StaticString, in details: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let key = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        var start = 0
        while start < details.count {
            let end = details[start...].firstIndex(of: 0x20) ?? details.count
            let token = UnsafeRawBufferPointer(rebasing: details[start..<end])
            if token.count > key.count, token[key.count] == UInt8(ascii: "="),
                token.prefix(key.count).elementsEqual(key)
            {
                return UnsafeRawBufferPointer(rebasing: token[(key.count + 1)...])
            }
            start = end + 1
        }
        return nil
    }

    static func decimal(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(UInt64(byte - 0x30))
            guard !o1 && !o2 else { return nil }
            value = sum
        }
        return value
    }

    /// Whether the status word is `ECHO`: a request line returned as it is by a verbatim echo
    /// server (see ``LoadConfiguration/verbatimEcho``).
    public var isVerbatimEcho: Bool {
        status.elementsEqual("ECHO".utf8)
    }

    private static func kind(status: UnsafeRawBufferPointer, details: UnsafeRawBufferPointer) -> ReplyKind {
        func equals(_ word: StaticString) -> Bool {
            status.count == word.utf8CodeUnitCount
                && status.elementsEqual(UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount))
        }
        func replayed() -> Bool {
            // Fast path: the protocol appends " replayed=true" last; otherwise look for the
            // field anywhere, but only when the details are long enough to hold it.
            let suffix: StaticString = "replayed=true"
            let length = suffix.utf8CodeUnitCount
            guard details.count >= length else { return false }
            let tail = UnsafeRawBufferPointer(rebasing: details[(details.count - length)...])
            if tail.elementsEqual(UnsafeRawBufferPointer(start: suffix.utf8Start, count: length)),
                details.count == length || details[details.count - length - 1] == 0x20
            {
                return true
            }
            guard let value = field("replayed", in: details) else { return false }
            return value.elementsEqual("true".utf8)
        }
        if equals("OK") { return replayed() ? .okReplayed : .ok }
        if equals("PONG") { return .pong }
        if equals("LIMITED") { return .limited }
        if equals("THROTTLED") { return .throttled }
        if equals("DECLINED") { return replayed() ? .declinedReplayed : .declined }
        if equals("MISMATCH") { return .mismatch }
        if equals("CANCELLED") { return .cancelled }
        if equals("SUPERSEDED") { return .superseded }
        if equals("ERR") { return .error }
        return .unknown
    }
}
