/// Writes JSON text by hand for the small, fixed shapes the HTTP front answers with: object
/// members appended in order, strings escaped per RFC 8259.
public struct JSONText: Sendable {
    /// The bytes so far.
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    /// An empty object, opened.
    public init() {
        bytes.reserveCapacity(64)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Appends `"name":"value"`.
    public mutating func member(_ name: StaticString, _ value: some StringProtocol) {
        key(name)
        Self.appendString(value, to: &bytes)
    }

    /// Appends `"name":value`.
    public mutating func member(_ name: StaticString, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// Appends `"name":true` or `false`.
    public mutating func member(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Appends `"name":["a","b",…]`.
    public mutating func member(_ name: StaticString, strings: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in strings.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            Self.appendString(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Closes the object and returns its bytes.
    public consuming func finished() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func key(_ name: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: "\":".utf8)
    }

    /// Appends `value` as a JSON string: quotes, backslashes and control characters escaped.
    public static func appendString(_ value: some StringProtocol, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
