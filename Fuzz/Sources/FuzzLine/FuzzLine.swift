import FuzzSupport
import SluiceLibevent
import SluiceLineProtocol

// fuzz-line: the byte stream of a connection, cut into chunks at points the input chooses, goes
// through `LineFramer` the way a connection feeds it (unconsumed bytes are fed again with more
// behind them; a callback may stop the framer early). Every line is then parsed by
// `RequestLine.parse` and taken apart with the `RequestLine` helpers.
//
// Input: [max length] [chunk count n] [n chunk sizes] [stop mask] [stream bytes…]
//
// Checks:
// - lines handed out hold no LF and are at most `maximumLineLength` bytes, and point into the
//   bytes that were fed; the count consumed is at most the bytes fed; after a call that was not
//   stopped, what is left holds no LF and is shorter than the overlong threshold (nothing when
//   skipping);
// - the events are the same whether the stream arrives in one chunk or in many, with or without
//   early stops, and equal a naive model (split on LF, drop one CR before it, a line longer than
//   the maximum is overlong, an unterminated tail of threshold bytes or more is overlong);
// - `parse` equals a naive parser (UTF-8 check, id of 1–32 id bytes, verb, arguments), and the
//   helpers (`verb(_:_:is:)`, `string`, `fields`, `key`, `integer`) equal naive versions.

/// One framing event, with the line's bytes copied out.
enum FrameEvent: Equatable {
    case line([UInt8])
    case overlong
}

/// What framing a whole stream produced, and the framer's state at the end.
struct FrameResult: Equatable {
    var events: [FrameEvent] = []
    var leftover: [UInt8] = []
    var skipping = false
}

let newline = UInt8(ascii: "\n")
let carriageReturn = UInt8(ascii: "\r")
let space = UInt8(ascii: " ")

/// Feeds `chunks` in order to one framer, like a connection's read buffer.
func frame(_ chunks: [ArraySlice<UInt8>], maximumLineLength: Int, stopMask: UInt8) -> FrameResult {
    var framer = LineFramer(maximumLineLength: maximumLineLength)
    var result = FrameResult()
    var pending: [UInt8] = []
    for chunk in chunks {
        pending.append(contentsOf: chunk)
        while true {
            var stopped = false
            var events: [FrameEvent] = []
            let stopAt = result.events.count
            let fed = pending.count
            let consumed = pending.withUnsafeBytes { buffer -> Int in
                let lower = UInt(bitPattern: buffer.baseAddress)
                let upper = lower + UInt(buffer.count)
                return framer.consume(buffer) { event in
                    switch event {
                    case .line(let line):
                        require(line.count <= maximumLineLength, "a line of \(line.count) bytes, maximum \(maximumLineLength)")
                        require(!line.contains(newline), "a line holds an LF")
                        if !line.isEmpty {
                            let start = UInt(bitPattern: line.baseAddress)
                            require(start >= lower && start + UInt(line.count) <= upper, "a line outside the bytes fed")
                        }
                        events.append(.line(Array(line)))
                    case .overlong:
                        events.append(.overlong)
                    }
                    let keepGoing = stopMask & (1 << UInt8((stopAt + events.count) % 8)) == 0
                    if !keepGoing { stopped = true }
                    return keepGoing
                }
            }
            require(consumed >= 0 && consumed <= fed, "consumed \(consumed) of \(fed) bytes")
            require(!stopped || consumed > 0, "stopped without consuming")
            result.events += events
            pending.removeFirst(consumed)
            if stopped { continue }
            require(!pending.contains(newline), "an LF left unconsumed")
            if framer.isSkipping {
                require(pending.isEmpty, "skipping, yet \(pending.count) bytes left")
            } else {
                require(pending.count < framer.overlongThreshold, "\(pending.count) bytes left without an overlong event")
            }
            break
        }
    }
    result.leftover = pending
    result.skipping = framer.isSkipping
    return result
}

/// The naive framing of a whole stream.
func naiveFrame(_ stream: ArraySlice<UInt8>, maximumLineLength: Int) -> FrameResult {
    var result = FrameResult()
    var rest = stream
    while let lf = rest.firstIndex(of: newline) {
        var content = rest[rest.startIndex..<lf]
        if content.last == carriageReturn { content = content.dropLast() }
        result.events.append(content.count > maximumLineLength ? .overlong : .line(Array(content)))
        rest = rest[(lf + 1)...]
    }
    if rest.count >= maximumLineLength + 2 {
        result.events.append(.overlong)
        result.skipping = true
    } else {
        result.leftover = Array(rest)
    }
    return result
}

func isIDByte(_ byte: UInt8) -> Bool {
    (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
        || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
}

/// What the naive parser makes of a line.
enum NaiveParse: Equatable {
    case malformed
    case missingVerb(id: Range<Int>)
    case parsed(id: Range<Int>, verb: Range<Int>, arguments: Range<Int>?)
}

func naiveParse(_ line: [UInt8]) -> NaiveParse {
    guard String(validating: line, as: UTF8.self) != nil else { return .malformed }
    let idEnd = line.firstIndex(of: space) ?? line.count
    guard idEnd > 0, idEnd <= 32, line[..<idEnd].allSatisfy(isIDByte) else { return .malformed }
    guard idEnd < line.count else { return .missingVerb(id: 0..<idEnd) }
    let verbStart = idEnd + 1
    let verbEnd = line[verbStart...].firstIndex(of: space) ?? line.count
    guard verbEnd > verbStart else { return .missingVerb(id: 0..<idEnd) }
    return .parsed(id: 0..<idEnd, verb: verbStart..<verbEnd, arguments: verbEnd < line.count ? (verbEnd + 1)..<line.count : nil)
}

func upper(_ byte: UInt8) -> UInt8 {
    byte >= 0x61 && byte <= 0x7A ? byte - 32 : byte
}

let verbs: [StaticString] = ["PING", "ECHO", "CANCEL", "STATS", "TAP", "PAY", "SEARCH", "LIMIT", "PAGE"]

func checkVerbs(_ buffer: UnsafeRawBufferPointer, _ line: [UInt8], _ range: Range<Int>) {
    for verb in verbs {
        let want = verb.withUTF8Buffer { expected in
            expected.count == range.count && zip(line[range], expected).allSatisfy { upper($0) == $1 }
        }
        require(RequestLine.verb(buffer, range, is: verb) == want, "verb(is: \(verb)) on \(line[range])")
    }
}

func naiveKey(_ text: Substring) -> String? {
    let utf8 = Array(text.utf8)
    guard utf8.count >= 1, utf8.count <= 128, utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
    return String(text)
}

func naiveInteger(_ text: Substring, in range: ClosedRange<Int>) -> Int? {
    let utf8 = Array(text.utf8)
    guard !utf8.isEmpty, utf8.count <= 18, utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    let value = utf8.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    return range.contains(value) ? value : nil
}

let integerRanges: [ClosedRange<Int>] = [0...Int.max, 1...1_000, 0...0, 5...999_999_999_999]

/// Parses `line` and checks the parse and the helpers against the naive versions.
func checkRequest(_ line: [UInt8]) {
    line.withUnsafeBytes { buffer in
        let parsed = RequestLine.parse(buffer)
        let want = naiveParse(line)
        switch parsed {
        case .failure(.malformed):
            require(want == .malformed, "parse says malformed, naive says \(want) for \(line)")
        case .failure(.missingVerb(let id)):
            require(want == .missingVerb(id: id), "parse says missingVerb(\(id)), naive says \(want) for \(line)")
            checkVerbs(buffer, line, id)
        case .success(let parts):
            require(
                want == .parsed(id: parts.id, verb: parts.verb, arguments: parts.arguments),
                "parse says \(parts), naive says \(want) for \(line)")
            checkVerbs(buffer, line, parts.verb)
            checkVerbs(buffer, line, parts.id)
            let id = RequestLine.string(buffer, parts.id)
            require(Array(id.utf8) == Array(line[parts.id]), "string(id)")
            let verb = RequestLine.string(buffer, parts.verb)
            require(Array(verb.utf8) == Array(line[parts.verb]), "string(verb)")
            guard let argumentRange = parts.arguments else { break }
            let text = RequestLine.string(buffer, argumentRange)
            require(Array(text.utf8) == Array(line[argumentRange]), "string(arguments)")
            checkArguments(text[...])
        }
    }
}

func checkArguments(_ arguments: Substring) {
    let isASCII = arguments.utf8.allSatisfy { $0 < 0x80 }
    // Split on the space byte: for ASCII text, the same as splitting on the space character.
    let byteFields = arguments.utf8.split(separator: space, omittingEmptySubsequences: false)
    for count in 1...4 {
        let fields = RequestLine.fields(arguments, count: count)
        if let fields {
            require(fields.count == count && fields.allSatisfy { !$0.isEmpty }, "fields(count: \(count)) gave \(fields)")
            require(fields.joined(separator: " ") == arguments, "fields(count: \(count)) do not rebuild \(arguments)")
        }
        if isASCII {
            let want = byteFields.count == count && byteFields.allSatisfy { !$0.isEmpty }
            require((fields != nil) == want, "fields(count: \(count)) of \(Array(arguments.utf8))")
            if let fields {
                require(fields.map { Array($0.utf8) } == byteFields.map { Array($0) }, "fields(count: \(count)) split")
            }
        }
    }
    var pieces = arguments.split(separator: " ", omittingEmptySubsequences: false)
    pieces.append(arguments)
    for piece in pieces.prefix(6) {
        require(RequestLine.key(piece) == naiveKey(piece), "key(\(Array(piece.utf8)))")
        for range in integerRanges {
            require(RequestLine.integer(piece, in: range) == naiveInteger(piece, in: range), "integer(\(Array(piece.utf8)), in: \(range))")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let maximumLineLength = 1 + input.below(48)
    let chunkCount = input.below(16)
    let sizes = (0..<chunkCount).map { _ in Int(input.byte()) % 64 }
    let stopMask = input.byte()
    let stream = Array(input.rest())[...]

    var chunks: [ArraySlice<UInt8>] = []
    var start = stream.startIndex
    for size in sizes {
        let end = Swift.min(stream.endIndex, start + size)
        chunks.append(stream[start..<end])
        start = end
    }
    chunks.append(stream[start...])

    let model = naiveFrame(stream, maximumLineLength: maximumLineLength)
    let whole = frame([stream], maximumLineLength: maximumLineLength, stopMask: 0)
    require(whole == model, "one chunk: \(whole) but the naive framing is \(model)")
    let stopping = frame([stream], maximumLineLength: maximumLineLength, stopMask: stopMask)
    require(stopping == model, "one chunk, stopping: \(stopping) but the naive framing is \(model)")
    let chunked = frame(chunks, maximumLineLength: maximumLineLength, stopMask: stopMask)
    require(chunked == model, "chunks \(sizes): \(chunked) but the naive framing is \(model)")
    let byteByByte = frame(stream.indices.map { stream[$0...$0] }, maximumLineLength: maximumLineLength, stopMask: stopMask)
    require(byteByByte == model, "byte by byte: \(byteByByte) but the naive framing is \(model)")

    for event in model.events {
        if case .line(let line) = event { checkRequest(line) }
    }
    return 0
}
