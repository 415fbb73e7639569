#if Hummingbird
/// The canonical form of a JSON text (RFC 8259), for fingerprints that do not depend on how a
/// client laid its JSON out: no whitespace between tokens, every object's members sorted by
/// their names' UTF-8 bytes, strings with their escapes resolved and written again the one way
/// (`\"`, `\\`, and `\u00XX` for the other controls; everything else as UTF-8, `/` unescaped).
/// Numbers keep their text (`1.0` and `1` stay apart: what they mean is the application's to
/// say).
///
/// A text that is not strict JSON (a trailing comma, a lone surrogate, a number like `01`),
/// that repeats a member name in an object (which member counts is up to the parser), or that
/// nests deeper than ``maximumDepth``, has no canonical form (`nil`): its bytes are the
/// fingerprint then.
enum CanonicalJSON {
    /// The deepest nesting of arrays and objects read.
    static let maximumDepth = 64

    /// The canonical form of `bytes`, or `nil` when it has none.
    static func canonical(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        var reader = Reader(bytes: Array(bytes))
        var output: [UInt8] = []
        output.reserveCapacity(reader.bytes.count)
        reader.skipWhitespace()
        guard reader.value(into: &output, depth: 0) else { return nil }
        reader.skipWhitespace()
        return reader.position == reader.bytes.count ? output : nil
    }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        var current: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        mutating func expect(_ literal: StaticString) -> Bool {
            let text = literal.withUTF8Buffer { Array($0) }
            guard bytes.count - position >= text.count, Array(bytes[position..<position + text.count]) == text else {
                return false
            }
            position += text.count
            return true
        }

        mutating func value(into output: inout [UInt8], depth: Int) -> Bool {
            guard let byte = current else { return false }
            switch byte {
            case UInt8(ascii: "{"): return object(into: &output, depth: depth + 1)
            case UInt8(ascii: "["): return array(into: &output, depth: depth + 1)
            case UInt8(ascii: "\""):
                guard let scalars = string() else { return false }
                Self.write(scalars, into: &output)
                return true
            case UInt8(ascii: "t"):
                guard expect("true") else { return false }
                output += Array("true".utf8)
                return true
            case UInt8(ascii: "f"):
                guard expect("false") else { return false }
                output += Array("false".utf8)
                return true
            case UInt8(ascii: "n"):
                guard expect("null") else { return false }
                output += Array("null".utf8)
                return true
            default:
                return number(into: &output)
            }
        }

        mutating func object(into output: inout [UInt8], depth: Int) -> Bool {
            guard depth <= CanonicalJSON.maximumDepth else { return false }
            position += 1
            var members: [(name: [UInt8], value: [UInt8])] = []
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                position += 1
                output += Array("{}".utf8)
                return true
            }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\""), let name = string() else { return false }
                var nameBytes: [UInt8] = []
                Self.write(name, into: &nameBytes)
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { return false }
                position += 1
                skipWhitespace()
                var value: [UInt8] = []
                guard self.value(into: &value, depth: depth) else { return false }
                members.append((nameBytes, value))
                skipWhitespace()
                if current == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                guard current == UInt8(ascii: "}") else { return false }
                position += 1
                break
            }
            members.sort { $0.name.lexicographicallyPrecedes($1.name) }
            for index in members.indices.dropFirst() where members[index].name == members[index - 1].name {
                return false
            }
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                output += member.name
                output.append(UInt8(ascii: ":"))
                output += member.value
            }
            output.append(UInt8(ascii: "}"))
            return true
        }

        mutating func array(into output: inout [UInt8], depth: Int) -> Bool {
            guard depth <= CanonicalJSON.maximumDepth else { return false }
            position += 1
            output.append(UInt8(ascii: "["))
            skipWhitespace()
            if current == UInt8(ascii: "]") {
                position += 1
                output.append(UInt8(ascii: "]"))
                return true
            }
            var first = true
            while true {
                skipWhitespace()
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                guard value(into: &output, depth: depth) else { return false }
                skipWhitespace()
                if current == UInt8(ascii: ",") {
                    position += 1
                    continue
                }
                guard current == UInt8(ascii: "]") else { return false }
                position += 1
                output.append(UInt8(ascii: "]"))
                return true
            }
        }

        /// A number as RFC 8259 spells it: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        mutating func number(into output: inout [UInt8]) -> Bool {
            let start = position
            func digits() -> Int {
                var count = 0
                while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                    position += 1
                    count += 1
                }
                return count
            }
            if current == UInt8(ascii: "-") { position += 1 }
            if current == UInt8(ascii: "0") {
                position += 1
            } else if digits() == 0 {
                return false
            }
            if current == UInt8(ascii: ".") {
                position += 1
                guard digits() > 0 else { return false }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                position += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
                guard digits() > 0 else { return false }
            }
            output += bytes[start..<position]
            return true
        }

        /// A string's Unicode scalars, its escapes resolved; `nil` for a malformed one (a raw
        /// control character, a bad escape, a lone surrogate, invalid UTF-8).
        mutating func string() -> [Unicode.Scalar]? {
            position += 1
            var scalars: [Unicode.Scalar] = []
            var raw: [UInt8] = []
            func flush() -> Bool {
                guard !raw.isEmpty else { return true }
                var decoder = UTF8()
                var iterator = raw.makeIterator()
                defer { raw.removeAll(keepingCapacity: true) }
                while true {
                    switch decoder.decode(&iterator) {
                    case .scalarValue(let scalar): scalars.append(scalar)
                    case .emptyInput: return true
                    case .error: return false
                    }
                }
            }
            while let byte = current {
                position += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return flush() ? scalars : nil
                case UInt8(ascii: "\\"):
                    guard flush(), let scalar = escape() else { return nil }
                    scalars.append(scalar)
                case 0..<0x20:
                    return nil
                default:
                    raw.append(byte)
                }
            }
            return nil
        }

        mutating func escape() -> Unicode.Scalar? {
            guard let byte = current else { return nil }
            position += 1
            switch byte {
            case UInt8(ascii: "\""): return "\""
            case UInt8(ascii: "\\"): return "\\"
            case UInt8(ascii: "/"): return "/"
            case UInt8(ascii: "b"): return "\u{08}"
            case UInt8(ascii: "f"): return "\u{0C}"
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "u"):
                guard let unit = hex4() else { return nil }
                if (0xD800...0xDBFF).contains(unit) {
                    guard expect("\\u"), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                    return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                }
                return Unicode.Scalar(unit)
            default:
                return nil
            }
        }

        mutating func hex4() -> UInt32? {
            guard bytes.count - position >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                position += 1
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }

        /// Writes a string the one canonical way.
        static func write(_ scalars: [Unicode.Scalar], into output: inout [UInt8]) {
            output.append(UInt8(ascii: "\""))
            for scalar in scalars {
                switch scalar.value {
                case 0x22: output += Array("\\\"".utf8)
                case 0x5C: output += Array("\\\\".utf8)
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    output += Array("\\u00".utf8)
                    output.append(hex[Int(scalar.value >> 4)])
                    output.append(hex[Int(scalar.value & 0xF)])
                default:
                    UTF8.encode(scalar) { output.append($0) }
                }
            }
            output.append(UInt8(ascii: "\""))
        }
    }
}
#endif
