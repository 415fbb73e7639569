/// Reads one member of a JSON object body (`{"charge": "c1", "amount": 5}`) without building the
/// whole document: what the HTTP mode checks in a response is one or two members of the top
/// level. Nested objects and arrays are skipped, strings are decoded (escapes and `\u` surrogate
/// pairs); anything that is not well-formed up to the member sought gives `nil`.
public enum JSONMembers {
    /// A member's value.
    public enum Value: Sendable, Hashable {
        /// A string, decoded.
        case string(String)
        /// A number, as written.
        case number(String)
        /// `true`, `false` or `null`, as written.
        case literal(String)
        /// An object or an array (not decoded).
        case composite
    }

    /// The value of the top-level member `name` of the object `body`, if `body` is an object
    /// that has it.
    public static func value(_ name: String, in body: UnsafeRawBufferPointer) -> Value? {
        var cursor = Cursor(bytes: body)
        cursor.skipSpaces()
        guard cursor.take(UInt8(ascii: "{")) else { return nil }
        cursor.skipSpaces()
        if cursor.take(UInt8(ascii: "}")) { return nil }
        while true {
            guard let key = cursor.string() else { return nil }
            cursor.skipSpaces()
            guard cursor.take(UInt8(ascii: ":")) else { return nil }
            cursor.skipSpaces()
            if key == name { return cursor.value() }
            guard cursor.skipValue() else { return nil }
            cursor.skipSpaces()
            if cursor.take(UInt8(ascii: ",")) {
                cursor.skipSpaces()
                continue
            }
            return nil
        }
    }

    /// The string member `name`, if there is one.
    public static func string(_ name: String, in body: UnsafeRawBufferPointer) -> String? {
        if case .string(let text) = value(name, in: body) { return text }
        return nil
    }

    /// The integer member `name` (a number without fraction or exponent), if there is one.
    public static func integer(_ name: String, in body: UnsafeRawBufferPointer) -> Int64? {
        if case .number(let text) = value(name, in: body) { return Int64(text) }
        return nil
    }

    /// A read position in the body.
    private struct Cursor {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpaces() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        /// Steps over `byte` when it is next.
        mutating func take(_ byte: UInt8) -> Bool {
            guard current == byte else { return false }
            index += 1
            return true
        }

        /// A value, decoded when it is a string.
        mutating func value() -> Value? {
            switch current {
            case UInt8(ascii: "\""):
                return string().map(Value.string)
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                return skipComposite() ? .composite : nil
            case .some:
                let start = index
                skipScalar()
                guard index > start else { return nil }
                let text = String(decoding: bytes[start..<index], as: UTF8.self)
                if text == "true" || text == "false" || text == "null" { return .literal(text) }
                return Self.isNumber(text) ? .number(text) : nil
            case nil:
                return nil
            }
        }

        /// Steps over a value; `false` when it is not well-formed.
        mutating func skipValue() -> Bool {
            value() != nil
        }

        /// Steps over the bytes of a number or a literal.
        mutating func skipScalar() {
            while let byte = current,
                (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".")
                    || byte == UInt8(ascii: "E")
            {
                index += 1
            }
        }

        /// Steps over an object or an array, strings inside included.
        mutating func skipComposite() -> Bool {
            var depth = 0
            while let byte = current {
                switch byte {
                case UInt8(ascii: "\""):
                    guard string() != nil else { return false }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return true
                    }
                default:
                    break
                }
                index += 1
            }
            return false
        }

        /// A string, decoded; `nil` when it is not a well-formed JSON string.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var scalars = String.UnicodeScalarView()
            var run = index
            while let byte = current {
                switch byte {
                case UInt8(ascii: "\""):
                    scalars.append(contentsOf: String(decoding: bytes[run..<index], as: UTF8.self).unicodeScalars)
                    index += 1
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    scalars.append(contentsOf: String(decoding: bytes[run..<index], as: UTF8.self).unicodeScalars)
                    index += 1
                    guard let scalar = escape() else { return nil }
                    scalars.append(scalar)
                    run = index
                case 0..<0x20:
                    return nil
                default:
                    index += 1
                }
            }
            return nil
        }

        /// The character of an escape, the backslash already read.
        private mutating func escape() -> Unicode.Scalar? {
            guard let byte = current else { return nil }
            index += 1
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return Unicode.Scalar(byte)
            case UInt8(ascii: "b"): return "\u{08}"
            case UInt8(ascii: "f"): return "\u{0C}"
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "u"):
                guard let high = hex4() else { return nil }
                if (0xD800..<0xDC00).contains(high) {
                    guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(), (0xDC00..<0xE000).contains(low) else {
                        return nil
                    }
                    return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                }
                return Unicode.Scalar(high)
            default: return nil
            }
        }

        /// Four hexadecimal digits.
        private mutating func hex4() -> UInt32? {
            guard bytes.count - index >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = current else { return nil }
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// Whether `text` is a JSON number: `-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?`.
        static func isNumber(_ text: String) -> Bool {
            var bytes = Substring(text).utf8[...]
            func digits() -> Int {
                var count = 0
                while let byte = bytes.first, byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                    bytes.removeFirst()
                    count += 1
                }
                return count
            }
            if bytes.first == UInt8(ascii: "-") { bytes.removeFirst() }
            if bytes.first == UInt8(ascii: "0") {
                bytes.removeFirst()
            } else if digits() == 0 {
                return false
            }
            if bytes.first == UInt8(ascii: ".") {
                bytes.removeFirst()
                guard digits() > 0 else { return false }
            }
            if bytes.first == UInt8(ascii: "e") || bytes.first == UInt8(ascii: "E") {
                bytes.removeFirst()
                if bytes.first == UInt8(ascii: "+") || bytes.first == UInt8(ascii: "-") { bytes.removeFirst() }
                guard digits() > 0 else { return false }
            }
            return bytes.isEmpty
        }
    }
}
