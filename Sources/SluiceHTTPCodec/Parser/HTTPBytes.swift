/// The byte classes of HTTP/1.1's grammar (RFC 9110 §5.6, RFC 3986), a few instructions each.
enum HTTPBytes {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A

    // Each class as two 64-bit masks (bytes 0–63 and 64–127), written out as literals: a table
    // in a global would cost a lazy-initialisation check (`swift_once`) on every byte.
    // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    @inline(__always) static func isToken(_ byte: UInt8) -> Bool { member(byte, 0x03FF_6CFA_0000_0000, 0x57FF_FFFF_C7FF_FFFE) }
    /// A request target's bytes: unreserved / sub-delims / ":" / "@" / "/" / "?" / "%" (RFC 3986;
    /// the percent's two hex digits are checked apart).
    @inline(__always) static func isTarget(_ byte: UInt8) -> Bool { member(byte, 0xAFFF_FFF2_0000_0000, 0x47FF_FFFE_87FF_FFFF) }
    /// A field value's bytes: VCHAR, SP, HTAB and obs-text.
    @inline(__always) static func isFieldValue(_ byte: UInt8) -> Bool {
        byte >= 0x80 || byte == tab || (byte >= 0x20 && byte != 0x7F)
    }
    /// A Host value's bytes: reg-name / IPv4 / IP-literal and a port (RFC 3986 §3.2.2).
    @inline(__always) static func isHost(_ byte: UInt8) -> Bool { member(byte, 0x2FFF_7FF2_0000_0000, 0x47FF_FFFE_AFFF_FFFE) }
    @inline(__always) static func isHex(_ byte: UInt8) -> Bool { member(byte, 0x03FF_0000_0000_0000, 0x0000_007E_0000_007E) }
    /// qdtext = HTAB / SP / "!" / %x23-5B / %x5D-7E / obs-text
    @inline(__always) static func isQuotedText(_ byte: UInt8) -> Bool {
        byte >= 0x80 || member(byte, 0xFFFF_FFFB_0000_0200, 0x7FFF_FFFF_EFFF_FFFF)
    }

    @inline(__always) private static func member(_ byte: UInt8, _ low: UInt64, _ high: UInt64) -> Bool {
        if byte < 64 { return (low >> UInt64(byte)) & 1 == 1 }
        if byte < 128 { return (high >> UInt64(byte - 64)) & 1 == 1 }
        return false
    }

    /// The value of a hex digit (the caller checked ``isHex(_:)``).
    @inline(__always) static func hexValue(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        default: Int(byte - UInt8(ascii: "A") + 10)
        }
    }

    /// ASCII lower case of a byte.
    @inline(__always) static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// Whether `bytes` equals `name` (lower case ASCII) ignoring ASCII case.
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        guard bytes.count == name.utf8CodeUnitCount else { return false }
        let expected = name.utf8Start
        for index in 0..<bytes.count where lower(bytes[index]) != expected[index] {
            return false
        }
        return true
    }

    /// Whether `bytes` equals `other` ignoring ASCII case.
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ other: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == other.count else { return false }
        for index in 0..<bytes.count where lower(bytes[index]) != lower(other[index]) {
            return false
        }
        return true
    }
}
