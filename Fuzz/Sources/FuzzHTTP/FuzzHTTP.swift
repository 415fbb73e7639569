import FuzzSupport
import HTTPTypes
import SluiceHTTP

// fuzz-http: the byte stream of an HTTP connection, cut into chunks at points the input chooses,
// goes through `HTTPRequestParser` the way a connection feeds it: request after request, the
// bytes of an incomplete one fed again with more behind them. Every request accepted is read
// through `HTTPRequestView` (target, path, query, fields, the swift-http-types values, the body).
//
// Input: [limits] [chunk count n] [n chunk sizes] [stream bytes…]
//
// Checks:
// - what is accepted lies within the bytes fed: a request's length is at most the bytes
//   available, its head at most its length and at most the head limit, its target inside the
//   head, its body inside the message and at most the body limit;
// - a head accepted ends with CRLF CRLF and holds no NUL, no bare LF and no bare CR; its method
//   is a registered one other than CONNECT; a refusal's status is one of 400, 413, 417, 431,
//   501, 505;
// - the requests and the refusal are the same whether the stream arrives whole, in the chosen
//   chunks, or a byte at a time;
// - a request accepted, parsed again alone by a fresh parser, is accepted the same (nothing it
//   was read as depends on what came before it);
// - the view's fields, read from the head's bytes, are as many as the head's field lines.

/// What the parser made of a request, with its parts copied out.
struct Accepted: Equatable {
    var length: Int
    var head: [UInt8]
    var target: [UInt8]
    var method: String
    var body: [UInt8]
    var keepAlive: Bool
}

enum End: Equatable {
    case clean
    case incomplete
    case refused(Int, String)
}

struct Stream: Equatable {
    var requests: [Accepted] = []
    var end = End.clean
}

let statuses: Set<Int> = [400, 413, 417, 431, 501, 505]

/// Parses `bytes` request after request, making `chunks` available one after another.
func parse(_ bytes: [UInt8], chunks: [Int], limits: HTTPRequestParser.Limits) -> Stream {
    var parser = HTTPRequestParser(limits: limits)
    var stream = Stream()
    var consumed = 0
    var available = 0
    var nextChunk = 0
    func feedMore() -> Bool {
        guard available < bytes.count else { return false }
        let size = nextChunk < chunks.count ? max(1, chunks[nextChunk]) : bytes.count - available
        nextChunk += 1
        available = min(bytes.count, available + size)
        return true
    }
    _ = feedMore()
    while true {
        let step: (Int, End?, Accepted?) = bytes.withUnsafeBytes { all in
            let window = UnsafeRawBufferPointer(rebasing: all[consumed..<available])
            switch parser.parse(window) {
            case .incomplete:
                return (0, nil, nil)
            case .refused(let problem):
                require(statuses.contains(problem.status.code), "a refusal with status \(problem.status.code)")
                return (0, .refused(problem.status.code, problem.slug), nil)
            case .request(let parsed):
                return (parsed.messageLength, nil, check(window, parsed, limits: limits))
            }
        }
        if let end = step.1 {
            stream.end = end
            return stream
        }
        if let request = step.2 {
            stream.requests.append(request)
            consumed += step.0
            if consumed == available && !feedMore() {
                stream.end = .clean
                return stream
            }
            continue
        }
        if !feedMore() {
            stream.end = consumed == bytes.count ? .clean : .incomplete
            return stream
        }
    }
}

/// Checks one accepted request and copies it out.
func check(_ window: UnsafeRawBufferPointer, _ parsed: HTTPParsedRequest, limits: HTTPRequestParser.Limits) -> Accepted {
    require(parsed.messageLength <= window.count, "a request of \(parsed.messageLength) bytes in \(window.count)")
    require(parsed.headLength <= parsed.messageLength, "a head longer than its message")
    require(parsed.headLength <= limits.maximumHeadBytes, "a head of \(parsed.headLength) bytes, limit \(limits.maximumHeadBytes)")
    require(parsed.target.lowerBound > 0 && parsed.target.upperBound < parsed.headLength, "a target outside the head")
    require(parsed.method != .connect, "CONNECT accepted")
    let head = Array(window[0..<parsed.headLength])
    require(head.count >= 4 && Array(head.suffix(4)) == Array("\r\n\r\n".utf8), "a head that does not end with CRLF CRLF")
    for index in head.indices {
        require(head[index] != 0, "a NUL in a head")
        if head[index] == 0x0A { require(index > 0 && head[index - 1] == 0x0D, "a bare LF in a head") }
        if head[index] == 0x0D { require(index + 1 < head.count && head[index + 1] == 0x0A, "a bare CR in a head") }
    }
    switch parsed.body {
    case .empty:
        require(parsed.messageLength == parsed.headLength, "an empty body with bytes after the head")
    case .range(let range):
        require(range.lowerBound == parsed.headLength && range.upperBound == parsed.messageLength, "a body range off the message")
    case .chunked(let range, let dataCount):
        require(range.lowerBound == parsed.headLength && range.upperBound == parsed.messageLength, "a chunked range off the message")
        require(dataCount <= range.count, "more data than framed bytes")
    }
    require(parsed.bodyCount <= limits.maximumBodyBytes, "a body of \(parsed.bodyCount) bytes, limit \(limits.maximumBodyBytes)")
    let view = HTTPRequestView(message: window, parsed: parsed)
    let body = view.withBody { Array($0) }
    require(body.count == parsed.bodyCount, "a decoded body of \(body.count) bytes, \(parsed.bodyCount) announced")
    _ = view.path
    _ = view.query
    _ = view.request
    let fieldLines = head.split(separator: 0x0A).count - 2
    require(view.headerFields.count == fieldLines, "\(view.headerFields.count) fields read, \(fieldLines) lines")
    // Alone, from a fresh parser, the same request.
    var alone = HTTPRequestParser(limits: limits)
    let message = Array(window[0..<parsed.messageLength])
    message.withUnsafeBytes { bytes in
        guard case .request(let again) = alone.parse(bytes) else {
            require(false, "a request accepted in a stream is refused alone")
            return
        }
        require(again == parsed, "a request read differently alone")
    }
    return Accepted(
        length: parsed.messageLength, head: head, target: Array(window[parsed.target]), method: parsed.method.rawValue,
        body: body, keepAlive: parsed.keepAlive)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let small = input.bool()
    let limits =
        small
        ? HTTPRequestParser.Limits(maximumHeadBytes: 256, maximumBodyBytes: 64, maximumChunkLineBytes: 32, maximumChunkFramingBytes: 128)
        : HTTPRequestParser.Limits()
    let chunkCount = input.below(8)
    let chunks = (0..<chunkCount).map { _ in input.int(in: 1...64) }
    let bytes = Array(input.rest())
    let whole = parse(bytes, chunks: [], limits: limits)
    let chunked = parse(bytes, chunks: chunks, limits: limits)
    require(whole == chunked, "the stream parses differently in chunks \(chunks)")
    if bytes.count <= 512 {
        let trickled = parse(bytes, chunks: Array(repeating: 1, count: bytes.count), limits: limits)
        require(whole == trickled, "the stream parses differently a byte at a time")
    }
    return 0
}
