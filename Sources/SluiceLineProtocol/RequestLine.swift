/// One request line of the line protocol, split into its parts:
/// `<id> <VERB> [<arguments>]` (the contract is in `Examples/EchoServer/README.md`).
///
/// Parsing works on the raw bytes and allocates nothing; ``Parsed`` holds byte ranges into the
/// line it was parsed from.
public enum RequestLine {
    /// The ranges of a parsed line's parts.
    public struct Parsed: Sendable, Hashable {
        /// The id's bytes.
        public var id: Range<Int>
        /// The verb's bytes (any case).
        public var verb: Range<Int>
        /// The arguments after the single space that follows the verb, or `nil` when the line
        /// ends at the verb.
        public var arguments: Range<Int>?
    }

    /// Why a line could not be parsed.
    public enum Failure: Error, Sendable, Hashable {
        /// No readable id, or not UTF-8: replied `- ERR malformed`.
        case malformed
        /// A readable id but no verb: replied `<id> ERR unknown-verb`.
        case missingVerb(id: Range<Int>)
    }

    /// The longest id accepted.
    public static let maximumIDLength = 32
    /// The longest key (and idempotency key) accepted.
    public static let maximumKeyLength = 128

    /// Splits `line` into id, verb and arguments.
    public static func parse(_ line: UnsafeRawBufferPointer) -> Result<Parsed, Failure> {
        guard isUTF8(line) else { return .failure(.malformed) }
        let space = UInt8(ascii: " ")
        var index = 0
        // The id is checked as it is scanned: one pass, and a bad id stops at its first byte.
        while index < line.count, line[index] != space {
            guard index < maximumIDLength, isIDByte(line[index]) else { return .failure(.malformed) }
            index += 1
        }
        let id = 0..<index
        guard index > 0 else { return .failure(.malformed) }
        guard index < line.count else { return .failure(.missingVerb(id: id)) }
        let verbStart = index + 1
        index = verbStart
        while index < line.count, line[index] != space { index += 1 }
        guard index > verbStart else { return .failure(.missingVerb(id: id)) }
        let verb = verbStart..<index
        let arguments = index < line.count ? (index + 1)..<line.count : nil
        return .success(Parsed(id: id, verb: verb, arguments: arguments))
    }

    /// Whether the bytes in `range` spell `verb` (given in upper case), ignoring ASCII case.
    @inlinable
    public static func verb(_ line: UnsafeRawBufferPointer, _ range: Range<Int>, is verb: StaticString) -> Bool {
        spells(line, range, upperCase: UnsafeRawBufferPointer(start: verb.utf8Start, count: verb.utf8CodeUnitCount))
    }

    /// Whether the bytes in `range` spell `verb` (a registered plugin's verb, upper case),
    /// ignoring ASCII case.
    static func verb(_ line: UnsafeRawBufferPointer, _ range: Range<Int>, matches verb: String) -> Bool {
        verb.utf8.withContiguousStorageIfAvailable {
            spells(line, range, upperCase: UnsafeRawBufferPointer($0))
        } ?? verb.utf8.elementsEqual(line[range].lazy.map(asciiUppercased))
    }

    /// Whether the bytes in `range` equal `expected` (upper case) after ASCII upper-casing.
    @usableFromInline
    static func spells(_ line: UnsafeRawBufferPointer, _ range: Range<Int>, upperCase expected: UnsafeRawBufferPointer) -> Bool {
        guard range.count == expected.count else { return false }
        for offset in 0..<range.count where asciiUppercased(line[range.lowerBound + offset]) != expected[offset] {
            return false
        }
        return true
    }

    @usableFromInline
    static func asciiUppercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 32 : byte
    }

    /// The text in `range` of `line` (which ``parse(_:)`` checked to be UTF-8).
    public static func string(_ line: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: line[range]), as: UTF8.self)
    }

    /// `fields` split on single spaces; `nil` unless there are exactly `count` non-empty ones.
    public static func fields(_ arguments: Substring, count: Int) -> [Substring]? {
        let parts = arguments.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == count, parts.allSatisfy({ !$0.isEmpty }) else { return nil }
        return parts
    }

    /// `text` if it is a valid key: 1–128 bytes of visible ASCII (0x21–0x7E).
    public static func key(_ text: Substring) -> String? {
        let utf8 = text.utf8
        guard (1...maximumKeyLength).contains(utf8.count),
            utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E })
        else { return nil }
        return String(text)
    }

    /// `text` as a decimal integer in `range`: ASCII digits only (no sign, no spaces), at most 18
    /// of them; `nil` otherwise.
    public static func integer(_ text: Substring, in range: ClosedRange<Int>) -> Int? {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count <= 18, utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int(text), range.contains(value)
        else { return nil }
        return value
    }

    /// Whether `byte` may appear in an id: `A–Z a–z 0–9 . _ : -`.
    @inline(__always)
    static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: ":"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// Whether `bytes` are valid UTF-8 (ASCII is checked eight bytes at a time).
    static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        let count = bytes.count
        while index + 8 <= count {
            if bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
                return String(validating: bytes, as: UTF8.self) != nil
            }
            index += 8
        }
        while index < count {
            if bytes[index] & 0x80 != 0 { return String(validating: bytes, as: UTF8.self) != nil }
            index += 1
        }
        return true
    }
}
