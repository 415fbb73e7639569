import HTTPTypes

/// A chunk-size line of a chunked body (RFC 9112 §7.1): hex digits, then extensions
/// `;name[=value]` with a token or quoted-string value, no whitespace anywhere.
enum ChunkLine {
    /// The most hex digits a chunk size may have (sizes past this are beyond any body limit).
    static let maximumDigits = 8

    /// The chunk's size, or why the line is refused.
    static func size(of line: UnsafeRawBufferPointer) -> Result<Int, HTTPProblem> {
        var index = 0
        var size = 0
        while index < line.count, HTTPBytes.isHex(line[index]) {
            guard index < maximumDigits else {
                return .failure(HTTPProblem(.badRequest, "bad-chunk-size", detail: "a chunk size has more than \(maximumDigits) hex digits"))
            }
            size = size * 16 + HTTPBytes.hexValue(line[index])
            index += 1
        }
        guard index > 0 else {
            return .failure(HTTPProblem(.badRequest, "bad-chunk-size", detail: "a chunk-size line does not start with hex digits"))
        }
        if let problem = checkExtensions(UnsafeRawBufferPointer(rebasing: line[index...])) { return .failure(problem) }
        return .success(size)
    }

    private static func checkExtensions(_ rest: UnsafeRawBufferPointer) -> HTTPProblem? {
        let bad = HTTPProblem(.badRequest, "bad-chunk-extension", detail: "a chunk extension is ;name or ;name=value with no whitespace")
        var index = 0
        while index < rest.count {
            guard rest[index] == UInt8(ascii: ";") else { return bad }
            index += 1
            let nameStart = index
            while index < rest.count, HTTPBytes.isToken(rest[index]) { index += 1 }
            guard index > nameStart else { return bad }
            guard index < rest.count, rest[index] == UInt8(ascii: "=") else { continue }
            index += 1
            if index < rest.count, rest[index] == UInt8(ascii: "\"") {
                index += 1
                var closed = false
                while index < rest.count {
                    let byte = rest[index]
                    if byte == UInt8(ascii: "\"") {
                        closed = true
                        index += 1
                        break
                    }
                    if byte == UInt8(ascii: "\\") {
                        // quoted-pair: "\" ( HTAB / SP / VCHAR / obs-text )
                        guard index + 1 < rest.count, HTTPBytes.isFieldValue(rest[index + 1]) else { return bad }
                        index += 2
                        continue
                    }
                    guard HTTPBytes.isQuotedText(byte) else { return bad }
                    index += 1
                }
                guard closed else { return bad }
            } else {
                let valueStart = index
                while index < rest.count, HTTPBytes.isToken(rest[index]) { index += 1 }
                guard index > valueStart else { return bad }
            }
        }
        return nil
    }
}
