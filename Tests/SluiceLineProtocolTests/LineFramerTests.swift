import SluiceLineProtocol
import Testing

/// Feeds chunks to a framer the way a connection does (unconsumed bytes are fed again with the
/// next chunk) and records what it reports.
private func frame(_ chunks: [String], maximumLineLength: Int = 8) -> [String] {
    var framer = LineFramer(maximumLineLength: maximumLineLength)
    var pending: [UInt8] = []
    var events: [String] = []
    for chunk in chunks {
        pending += Array(chunk.utf8)
        let consumed = pending.withUnsafeBytes { bytes in
            framer.consume(bytes) { event in
                switch event {
                case .line(let line): events.append("line:" + String(decoding: line, as: UTF8.self))
                case .overlong: events.append("overlong")
                }
                return true
            }
        }
        pending.removeFirst(consumed)
    }
    return events
}

@Suite struct LineFramerTests {
    @Test(arguments: [
        (["a\nb\n"], ["line:a", "line:b"]),
        (["a\r\nb\r\n"], ["line:a", "line:b"]),
        (["\n"], ["line:"]),
        (["\r\n"], ["line:"]),
        (["a\rb\n"], ["line:a\rb"]),  // a CR not right before the LF stays
        (["ab", "c\n"], ["line:abc"]),  // split across reads
        (["abc\r", "\n"], ["line:abc"]),  // CR and LF in different reads
        (["no nl"], []),  // incomplete and not yet overlong: wait
        (["123456789"], []),  // 9 bytes: could still be 8 + CR
        (["1234567890"], ["overlong"]),  // 10 bytes without LF: too long whatever follows
        (["12345678\n"], ["line:12345678"]),  // exactly the maximum
        (["12345678\r\n"], ["line:12345678"]),  // the maximum plus CR
        (["123456789\n", "ok\n"], ["overlong", "line:ok"]),  // one byte over, LF seen
        (["1234567890", "xyz\n", "ok\n"], ["overlong", "line:ok"]),  // reported before its LF, skipped to it
        (["1234567890", "more", "more", "\nok\n"], ["overlong", "line:ok"]),  // reported once only
        (["123456789\r\n"], ["line:123456789"].map { _ in "overlong" }),  // 9 bytes of content > 8
    ])
    func framesLines(chunks: [String], expected: [String]) {
        #expect(frame(chunks) == expected)
    }

    @Test func stopsWhenTheCallbackSaysSo() {
        var framer = LineFramer(maximumLineLength: 16)
        let bytes = Array("a\nb\nc\n".utf8)
        var seen = 0
        let consumed = bytes.withUnsafeBytes { buffer in
            framer.consume(buffer) { _ in
                seen += 1
                return false
            }
        }
        #expect(seen == 1)
        #expect(consumed == 2)
    }
}
