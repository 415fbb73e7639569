import Foundation

/// One request as the fake server reads it.
struct FakeHTTPRequest {
    var method: String
    var path: String
    var query: [String: String]
    /// Header fields by lower-cased name.
    var fields: [String: String]
    var body: [UInt8]

    /// The first whole request of `buffer` and its length, if one is there.
    static func parse(_ buffer: [UInt8]) -> (FakeHTTPRequest, Int)? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard buffer.count >= 4, let headEnd = (0...(buffer.count - 4)).first(where: { buffer[$0..<($0 + 4)].elementsEqual(terminator) }) else {
            return nil
        }
        let lines = String(decoding: buffer[0..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3 else { return nil }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(fields["content-length"] ?? "0") ?? 0
        let total = headEnd + 4 + length
        guard buffer.count >= total else { return nil }
        let target = String(requestLine[1])
        let parts = target.split(separator: "?", maxSplits: 1)
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let nameValue = pair.split(separator: "=", maxSplits: 1)
                query[String(nameValue[0])] = nameValue.count == 2 ? String(nameValue[1]).removingPercentEncoding : ""
            }
        }
        let request = FakeHTTPRequest(
            method: String(requestLine[0]), path: String(parts[0]).removingPercentEncoding ?? String(parts[0]),
            query: query, fields: fields, body: Array(buffer[(headEnd + 4)..<total]))
        return (request, total)
    }
}
