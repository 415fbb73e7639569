/// Reads the samples of a Prometheus text exposition (`GET /metrics`, format 0.0.4):
/// `name value [timestamp]` or `name{label="value",…} value [timestamp]`, one a line, with `#`
/// comment lines (`# HELP`, `# TYPE`) and blank lines between them.
public enum PrometheusText {
    /// The sum of every sample of each metric name, over all its label sets (a counter split by
    /// labels, say per plugin or per loop, adds up to its total). Lines that are not samples,
    /// and values that are not finite numbers, are skipped.
    public static func totals(_ text: String) -> [String: Double] {
        var totals: [String: Double] = [:]
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            guard let (name, value) = sample(line) else { continue }
            totals[name, default: 0] += value
        }
        return totals
    }

    /// The metric name and value of one sample line, if it is one.
    static func sample(_ line: Substring) -> (name: String, value: Double)? {
        var rest = line.utf8[...]
        while let first = rest.first, first == 0x20 || first == 0x09 { rest.removeFirst() }
        guard let first = rest.first, first != UInt8(ascii: "#") else { return nil }
        // The name: [a-zA-Z_:][a-zA-Z0-9_:]*
        var nameEnd = rest.startIndex
        while nameEnd < rest.endIndex, isNameByte(rest[nameEnd], first: nameEnd == rest.startIndex) {
            nameEnd = rest.index(after: nameEnd)
        }
        guard nameEnd > rest.startIndex else { return nil }
        let name = String(decoding: rest[rest.startIndex..<nameEnd], as: UTF8.self)
        rest = rest[nameEnd...]
        if rest.first == UInt8(ascii: "{") {
            guard let afterLabels = skipLabels(rest) else { return nil }
            rest = afterLabels
        }
        // At least one space, the value, then an optional timestamp.
        guard let space = rest.first, space == 0x20 || space == 0x09 else { return nil }
        while let byte = rest.first, byte == 0x20 || byte == 0x09 { rest.removeFirst() }
        let valueEnd = rest.firstIndex(where: { $0 == 0x20 || $0 == 0x09 }) ?? rest.endIndex
        let valueText = String(decoding: rest[rest.startIndex..<valueEnd], as: UTF8.self)
        guard let value = Double(valueText), value.isFinite else { return nil }
        return (name, value)
    }

    /// The rest of the line after a `{…}` label set, quoted values (with `\"`, `\\` and `\n`
    /// escapes) allowed to hold `}` and spaces; `nil` when the set is not closed.
    private static func skipLabels(_ text: Substring.UTF8View.SubSequence) -> Substring.UTF8View.SubSequence? {
        var index = text.index(after: text.startIndex)
        var quoted = false
        while index < text.endIndex {
            let byte = text[index]
            if quoted {
                if byte == UInt8(ascii: "\\") {
                    index = text.index(after: index)
                    guard index < text.endIndex else { return nil }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = false
                }
            } else if byte == UInt8(ascii: "\"") {
                quoted = true
            } else if byte == UInt8(ascii: "}") {
                return text[text.index(after: index)...]
            }
            index = text.index(after: index)
        }
        return nil
    }

    private static func isNameByte(_ byte: UInt8, first: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"), UInt8(ascii: ":"):
            true
        case UInt8(ascii: "0")...UInt8(ascii: "9"):
            !first
        default:
            false
        }
    }
}
