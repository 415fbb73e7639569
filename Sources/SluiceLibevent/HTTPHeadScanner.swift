#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a request head as its bytes arrive, in chunks of any size, for what `evhttp` does not
/// bound by itself: the head's size, and a `Content-Length` over the body limit (so that the
/// request is refused before `evhttp` reads a byte of the body).
///
/// A line ends at LF; CR bytes are left out wherever they are, so a line of CRs alone is blank.
/// The head ends at the first blank line after a line that is not blank (blank lines before the
/// request line are skipped, as RFC 9112 allows). Each chunk is searched for LF with `memchr`;
/// only the first 48 bytes of a line that starts with `c` are looked at byte by byte.
struct HTTPHeadScanner {
    /// What the bytes scanned so far show.
    enum Verdict: Equatable {
        /// The head goes on.
        case incomplete
        /// The blank line that ends the head has been scanned.
        case ended
        /// The head is larger than the limit (the blank line that ends it counted).
        case tooLarge
    }

    /// The most bytes a head may have.
    let maximumHeadBytes: Int
    /// The most bytes a body may have: a larger `Content-Length` is noted.
    let maximumBodyBytes: Int
    /// The head's bytes scanned so far (past the limit, scanning stops and this is over it).
    private(set) var bytes = 0
    /// Whether a `Content-Length` field announced more than ``maximumBodyBytes``.
    private(set) var announcedBodyTooLarge = false
    /// Whether the current line has a byte other than CR.
    private var lineStarted = false
    /// Whether a line other than a blank one has been scanned.
    private var sawLine = false
    /// Whether the current line starts with `c` (its prefix is kept).
    private var keepingLinePrefix = false
    /// The first bytes of the current line, lower-cased, CR left out (lines that start with `c`).
    private var linePrefix: [UInt8] = []
    private(set) var verdict = Verdict.incomplete

    /// The prefix kept of a line: enough for `content-length:`, blanks and 18 digits.
    static let linePrefixLength = 48
    /// `content-length:`, as the lower-cased line prefix shows it.
    private static let contentLengthName = Array("content-length:".utf8)

    init(maximumHeadBytes: Int, maximumBodyBytes: Int) {
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumBodyBytes = maximumBodyBytes
        linePrefix.reserveCapacity(Self.linePrefixLength)
    }

    /// Starts over, for the next head.
    mutating func reset() {
        bytes = 0
        announcedBodyTooLarge = false
        lineStarted = false
        sawLine = false
        keepingLinePrefix = false
        linePrefix.removeAll(keepingCapacity: true)
        verdict = .incomplete
    }

    /// Scans the next bytes of the head. Once the verdict is no longer ``Verdict/incomplete``,
    /// further bytes are not scanned (they belong to the body, or are refused with the head).
    @discardableResult
    mutating func scan(_ chunk: UnsafeRawBufferPointer) -> Verdict {
        guard verdict == .incomplete, let base = chunk.baseAddress else { return verdict }
        var offset = 0
        while offset < chunk.count {
            let start = base + offset
            let newline = memchr(start, 0x0A, chunk.count - offset).map { UnsafeRawPointer($0) }
            let length = newline.map { $0 - start } ?? chunk.count - offset
            bytes += length
            if bytes > maximumHeadBytes {
                verdict = .tooLarge
                return verdict
            }
            let line = UnsafeRawBufferPointer(start: start, count: length)
            var index = 0
            if !lineStarted {
                while index < length, line[index] == 0x0D { index += 1 }
                if index < length {
                    lineStarted = true
                    keepingLinePrefix = line[index] | 0x20 == UInt8(ascii: "c")
                }
            }
            if keepingLinePrefix {
                while index < length, linePrefix.count < Self.linePrefixLength {
                    let byte = line[index]
                    index += 1
                    if byte != 0x0D { linePrefix.append(byte | (byte >= 0x41 && byte <= 0x5A ? 0x20 : 0)) }
                }
            }
            // The line goes on in the next chunk.
            guard newline != nil else { return verdict }
            bytes += 1
            if bytes > maximumHeadBytes {
                verdict = .tooLarge
                return verdict
            }
            if !lineStarted && sawLine {
                verdict = .ended
                return verdict
            }
            sawLine = sawLine || lineStarted
            if keepingLinePrefix { lineEnded() }
            lineStarted = false
            keepingLinePrefix = false
            offset += length + 1
        }
        return verdict
    }

    /// A line that starts with `c` ended: a `Content-Length` over the body limit is noted.
    private mutating func lineEnded() {
        defer { linePrefix.removeAll(keepingCapacity: true) }
        let name = Self.contentLengthName
        guard linePrefix.count > name.count, linePrefix.starts(with: name) else { return }
        let digits = linePrefix[name.count...].drop { $0 == 0x20 || $0 == 0x09 }.prefix { $0 >= 0x30 && $0 <= 0x39 }
        // More than 18 digits is over any limit.
        if digits.count > 18 || (Int(String(decoding: digits, as: UTF8.self)) ?? 0) > maximumBodyBytes {
            announcedBodyTooLarge = true
        }
    }
}
