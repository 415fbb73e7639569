import PropertyBased
import Testing

@testable import SluiceLibevent

/// The head scanner that bounds what `evhttp` reads: table cases, then any chunking of any
/// head against a byte-at-a-time model.
@Suite struct HTTPHeadScannerTests {
    /// The scanner's verdict, bytes and body flag after `chunks`, fed one after the other.
    private static func scan(_ chunks: [[UInt8]], head: Int = 64, body: Int = 100) -> (HTTPHeadScanner.Verdict, Int, Bool) {
        var scanner = HTTPHeadScanner(maximumHeadBytes: head, maximumBodyBytes: body)
        for chunk in chunks {
            chunk.withUnsafeBytes { _ = scanner.scan($0) }
        }
        return (scanner.verdict, scanner.bytes, scanner.announcedBodyTooLarge)
    }

    private static func scan(_ text: String, head: Int = 64, body: Int = 100) -> (HTTPHeadScanner.Verdict, Int, Bool) {
        scan([Array(text.utf8)], head: head, body: body)
    }

    @Test func headsEndAtTheirFirstBlankLine() {
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == (.ended, 27, false))
        // Bare LF, and CR left out wherever it is: a line of CRs is blank.
        #expect(Self.scan("GET / HTTP/1.1\nHost: a\n\n") == (.ended, 24, false))
        #expect(Self.scan("GET / HTTP/1.1\r\n\r\r\n") == (.ended, 19, false))
        // Blank lines before the request line are skipped.
        #expect(Self.scan("\r\n\r\nGET / HTTP/1.1\r\n\r\n") == (.ended, 22, false))
        // Bytes after the blank line belong to the body and are not counted.
        #expect(Self.scan("GET / HTTP/1.1\r\n\r\nbody bytes") == (.ended, 18, false))
        #expect(Self.scan("GET / HTTP/1.1\r\nHost: a\r\n") == (.incomplete, 25, false))
    }

    @Test func aHeadOverTheLimitIsTooLarge() {
        let head = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 40) + "\r\n\r\n"
        #expect(head.utf8.count == 63)
        #expect(Self.scan(head, head: 63).0 == .ended)
        #expect(Self.scan(head, head: 62).0 == .tooLarge)
        // Found without the blank line too, and whatever follows is not scanned.
        #expect(Self.scan(String(repeating: "a", count: 70), head: 64).0 == .tooLarge)
    }

    @Test func aContentLengthOverTheBodyLimitIsNoted() {
        #expect(Self.scan("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n").2 == false)
        #expect(Self.scan("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n").2 == true)
        #expect(Self.scan("POST / HTTP/1.1\r\ncontent-LENGTH:\t 101\r\n\r\n").2 == true)
        #expect(Self.scan("POST / HTTP/1.1\r\nContent-Length: 1234567890123456789012\r\n\r\n", head: 128).2 == true)
        // Another field starting with c, or the name inside another field, is not the length.
        #expect(Self.scan("POST / HTTP/1.1\r\nContent-Type: 101\r\nX-Content-Length: 900\r\n\r\n", head: 128).2 == false)
    }

    @Test func aScannerStartsOverForTheNextHead() {
        var scanner = HTTPHeadScanner(maximumHeadBytes: 64, maximumBodyBytes: 100)
        Array("POST / HTTP/1.1\r\nContent-Length: 500\r\n\r\n".utf8).withUnsafeBytes { _ = scanner.scan($0) }
        #expect(scanner.verdict == .ended && scanner.announcedBodyTooLarge)
        scanner.reset()
        #expect(scanner.verdict == .incomplete && scanner.bytes == 0 && !scanner.announcedBodyTooLarge)
        Array("GET / HTTP/1.1\r\n\r\n".utf8).withUnsafeBytes { _ = scanner.scan($0) }
        #expect(scanner.verdict == .ended && !scanner.announcedBodyTooLarge)
    }

    /// Any head, cut into chunks anywhere, gets the verdict, byte count and body flag of a
    /// model that reads it one byte at a time.
    @Test func anyChunkingMatchesAByteAtATimeModel() async {
        // Lines drawn from pieces that matter: CR, LF, `Content-Length` in two cases, digits.
        let pieces = [
            "\r", "\n", "\r\n", "Content-Length: ", "content-length:", "CONTENT-LENGTH:  ", "Content-Type: ", "c", "C",
            "99", "101", "7", "1234567890123456789", "X: y", "GET / HTTP/1.1", " ", "\t",
        ]
        let text = Gen.int(in: 0...(pieces.count - 1)).array(of: 0...24)
        await propertyCheck(count: 500, input: text, Gen.int(in: 1...9).array(of: 0...12), Gen.int(in: 8...90)) { indices, cuts, limit in
            let bytes = Array(indices.map { pieces[$0] }.joined().utf8)
            var chunks: [[UInt8]] = []
            var rest = bytes[...]
            for cut in cuts where !rest.isEmpty {
                chunks.append(Array(rest.prefix(cut)))
                rest = rest.dropFirst(cut)
            }
            chunks.append(Array(rest))
            let scanned = Self.scan(chunks, head: limit, body: 100)
            let model = ByteAtATimeHeadModel(bytes: bytes, maximumHeadBytes: limit, maximumBodyBytes: 100)
            #expect(scanned.0 == model.verdict, "\(String(decoding: bytes, as: UTF8.self).debugDescription) in \(chunks.map(\.count))")
            if model.verdict != .tooLarge {
                #expect(scanned.1 == model.bytes)
            }
            #expect(scanned.2 == model.announcedBodyTooLarge)
        }
    }
}

/// The head scanner's rules, one byte at a time: a line's bytes (CR left out) are kept; at LF a
/// blank line after a line that is not blank ends the head, and a kept line that reads
/// `content-length:` (any case), blanks and digits over the body limit is noted. Only the first
/// 48 bytes of a line count for the length.
private struct ByteAtATimeHeadModel {
    var verdict = HTTPHeadScanner.Verdict.incomplete
    var bytes = 0
    var announcedBodyTooLarge = false

    init(bytes input: [UInt8], maximumHeadBytes: Int, maximumBodyBytes: Int) {
        var line: [UInt8] = []
        var sawLine = false
        for byte in input {
            bytes += 1
            if bytes > maximumHeadBytes {
                verdict = .tooLarge
                return
            }
            if byte == 0x0A {
                if line.isEmpty && sawLine {
                    verdict = .ended
                    return
                }
                sawLine = sawLine || !line.isEmpty
                let text = String(decoding: line.prefix(48), as: UTF8.self).lowercased()
                if text.hasPrefix("content-length:") {
                    let digits = text.dropFirst(15).drop { $0 == " " || $0 == "\t" }.prefix { $0.isASCII && $0.isNumber }
                    if digits.count > 18 || (Int(digits) ?? 0) > maximumBodyBytes { announcedBodyTooLarge = true }
                }
                line = []
            } else if byte != 0x0D {
                line.append(byte)
            }
        }
    }
}
