/// The byte classes of HTTP/1.1's grammar (RFC 9110 §5.6, RFC 3986), one table lookup each.
enum HTTPBytes {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A

    private static let tokenBit: UInt8 = 1
    private static let targetBit: UInt8 = 2
    private static let valueBit: UInt8 = 4
    private static let hostBit: UInt8 = 8
    private static let hexBit: UInt8 = 16
    private static let quotedBit: UInt8 = 32

    /// One entry per byte value: the classes it belongs to.
    private static let classes: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 256)
        let alpha = Array(UInt8(ascii: "a")...UInt8(ascii: "z")) + Array(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        let digits = Array(UInt8(ascii: "0")...UInt8(ascii: "9"))
        // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
        for byte in alpha + digits + Array("!#$%&'*+-.^_`|~".utf8) { table[Int(byte)] |= tokenBit }
        // A request target: unreserved / sub-delims / ":" / "@" / "/" / "?" / "%" (RFC 3986; the
        // percent's two hex digits are checked apart).
        for byte in alpha + digits + Array("-._~!$&'()*+,;=:@/?%".utf8) { table[Int(byte)] |= targetBit }
        // A field value's bytes: VCHAR, SP, HTAB and obs-text.
        for byte in 0x21...0x7E { table[byte] |= valueBit }
        for byte in 0x80...0xFF { table[byte] |= valueBit }
        table[0x20] |= valueBit
        table[0x09] |= valueBit
        // A Host value: reg-name / IPv4 / IP-literal and a port (RFC 3986 §3.2.2).
        for byte in alpha + digits + Array("-._~!$&'()*+,;=:[]%".utf8) { table[Int(byte)] |= hostBit }
        for byte in digits + Array("abcdefABCDEF".utf8) { table[Int(byte)] |= hexBit }
        // qdtext = HTAB / SP / "!" / %x23-5B / %x5D-7E / obs-text
        for byte in [0x09, 0x20, 0x21] + Array(0x23...0x5B) + Array(0x5D...0x7E) + Array(0x80...0xFF) {
            table[byte] |= quotedBit
        }
        return table
    }()

    @inline(__always) static func isToken(_ byte: UInt8) -> Bool { classes[Int(byte)] & tokenBit != 0 }
    @inline(__always) static func isTarget(_ byte: UInt8) -> Bool { classes[Int(byte)] & targetBit != 0 }
    @inline(__always) static func isFieldValue(_ byte: UInt8) -> Bool { classes[Int(byte)] & valueBit != 0 }
    @inline(__always) static func isHost(_ byte: UInt8) -> Bool { classes[Int(byte)] & hostBit != 0 }
    @inline(__always) static func isHex(_ byte: UInt8) -> Bool { classes[Int(byte)] & hexBit != 0 }
    @inline(__always) static func isQuotedText(_ byte: UInt8) -> Bool { classes[Int(byte)] & quotedBit != 0 }

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
