import HTTPTypes
/// Keys and query values taken from a request target: percent-decoded, then checked.
public enum HTTPPathKey {
    /// The longest key accepted, in bytes (as in the line protocol).
    public static let maximumLength = 128

    /// The key in a path segment: percent-decoded, then 1–128 bytes of visible ASCII
    /// (0x21–0x7E), as a line-protocol key; otherwise a 400 problem `bad-key`.
    public static func decode(_ segment: Substring) throws(HTTPProblem) -> String {
        // Most keys have no escape: taken as they are, without a decoded copy.
        let utf8 = segment.utf8
        if (1...maximumLength).contains(utf8.count), utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "%") }) {
            return String(segment)
        }
        guard let decoded = percentDecoded(segment, plusIsSpace: false),
            (1...maximumLength).contains(decoded.count),
            decoded.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E })
        else {
            throw HTTPProblem(.badRequest, "bad-key", detail: "a key is 1 to \(maximumLength) bytes of visible ASCII, percent-encoded in a path")
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// `key` if it is a valid key (1–128 bytes of visible ASCII); otherwise a 400 `bad-key`.
    public static func checkKey(_ key: String) throws(HTTPProblem) -> String {
        guard (1...maximumLength).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw HTTPProblem(.badRequest, "bad-key", detail: "a key is 1 to \(maximumLength) bytes of visible ASCII")
        }
        return key
    }

    /// The value of the first `name=` parameter in a query (`application/x-www-form-urlencoded`:
    /// `+` is a space), decoded; `nil` when absent or not valid UTF-8 once decoded.
    public static func queryValue(_ name: String, in query: Substring?) -> String? {
        guard let query else { return nil }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let rawName = percentDecoded(parts[0], plusIsSpace: true),
                String(decoding: rawName, as: UTF8.self) == name
            else { continue }
            guard let value = percentDecoded(parts.count > 1 ? parts[1] : "", plusIsSpace: true) else { return nil }
            return String(validating: value, as: UTF8.self)
        }
        return nil
    }

    /// `text` with `%XX` escapes (and `+`, when `plusIsSpace`) decoded; `nil` for a bad escape.
    static func percentDecoded(_ text: Substring, plusIsSpace: Bool) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(0x20)
            default:
                bytes.append(byte)
            }
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
