import Foundation
import HTTPTypes
import SluiceHTTP
import SluiceTestSupport
import Testing

/// Sluice's request parser against two parsers nobody here wrote: Python's h11 and llhttp (the
/// parser under Node.js and SwiftNIO), run by `Tests/HTTPDifferential/reference.py` over every
/// framing case: the hand-made corpus (`corpus.json`: the RFC's cases and the smuggling corpora)
/// and a generated set (`HTTPFramingCases`).
///
/// The verdict, per case and per reference:
/// - Sluice never accepts a message the reference refuses;
/// - where both accept a message, they read the same request: method, target, framing (length
///   or chunked) and body bytes;
/// - Sluice never waits for more bytes where the reference has read a whole message (that would
///   be a body boundary read differently);
/// - where Sluice refuses a message the reference accepts, Sluice's reason is in ``stricter``,
///   with the RFC clause that allows the refusal. Those cases are listed in the test's output.
@Suite(.serialized) struct HTTPDifferentialTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("HTTPDifferential")

    /// Why Sluice may refuse what a reference accepts: each refusal slug with the clause that
    /// allows (or asks for) the refusal.
    static let stricter: [String: String] = [
        "bare-lf": "RFC 9112 §2.2: a recipient MAY take a bare LF as a line end; Sluice takes CRLF only",
        "bare-cr": "RFC 9112 §2.2: a bare CR MUST be treated as invalid (or replaced by SP); Sluice refuses",
        "leading-empty-line": "RFC 9112 §2.2: a server SHOULD ignore an empty line before the request line; refusing is the strict reading",
        "bad-request-line": "RFC 9112 §3: request-line = method SP request-target SP HTTP-version, single spaces",
        "unknown-method": "RFC 9110 §9.1: an unrecognized method SHOULD get 501",
        "bad-target": "RFC 9112 §3.2: origin-form, absolute-form, authority-form (CONNECT) or asterisk-form (OPTIONS); no fragment",
        "unsupported-version": "RFC 9110 §15.6.6 and RFC 9112 §2.3: 505 for a version the server does not support",
        "missing-host": "RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host",
        "duplicate-host": "RFC 9112 §3.2: ... or with more than one Host field line",
        "bad-host": "RFC 9112 §3.2: ... or with a Host field of an invalid value (RFC 9110 §7.2: uri-host [\":\" port])",
        "space-before-colon": "RFC 9112 §5.1: no whitespace between field name and colon; a server MUST reject it with 400",
        "obs-fold": "RFC 9112 §5.2: a server MUST reject obs-fold with 400 (or replace it)",
        "bad-field-name": "RFC 9110 §5.1: field-name = token",
        "bad-field-value": "RFC 9110 §5.5: a field value holds no CR, LF or NUL, and no other control",
        "bad-content-length": "RFC 9110 §8.6: Content-Length = 1*DIGIT; a list or tabs around it are not one length",
        "duplicate-content-length": "RFC 9112 §6.3 (item 5): several Content-Length lines are an invalid length unless the recipient merges them; Sluice does not",
        "content-length-and-transfer-encoding": "RFC 9112 §6.1: a server MAY reject a request with both, and MUST close after it",
        "bad-transfer-encoding": "RFC 9112 §6.1: chunked is the final coding, once; a framing value holds no tab",
        "transfer-encoding-http10": "RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing",
        "unsupported-transfer-encoding": "RFC 9112 §6.1: a server SHOULD answer 501 to a transfer coding it does not understand",
        "bad-chunk-size": "RFC 9112 §7.1: chunk-size = 1*HEXDIG, bounded",
        "bad-chunk-extension": "RFC 9112 §7.1.1: chunk-ext = *( BWS \";\" BWS ext-name [ BWS \"=\" BWS ext-val ] ); Sluice reads it without BWS",
        "bad-chunk": "RFC 9112 §7.1: chunk-data is followed by CRLF",
        "chunk-line-too-long": "RFC 9112 §7.1.1: a server ought to limit the length of chunk extensions",
        "bad-trailer": "RFC 9110 §6.5.1: a trailer is never used to frame the message",
        "bad-connection": "RFC 9110 §7.6.1: Connection = #connection-option (tokens)",
        "unsupported-expectation": "RFC 9110 §10.1.1: a server MAY answer 417 to an expectation it cannot meet",
        "connect-not-supported": "RFC 9110 §9.3.6: CONNECT is for proxies; an origin server answers 501",
        "header-fields-too-large": "RFC 6585 §5: 431 for a head larger than the server accepts",
        "body-too-large": "RFC 9110 §15.5.14: 413 for a body larger than the server accepts",
    ]

    /// A case's requests as one parser read them.
    struct Reading {
        struct Request: Equatable {
            var method: String
            var target: String
            var chunked: Bool
            var contentLength: Int?
            var body: [UInt8]
        }

        var requests: [Request] = []
        /// The slug of Sluice's refusal, or a reference's error text.
        var refusal: String?
        var incomplete = false
    }

    /// Parses `bytes` as a connection would: request after request, stopping after a refusal
    /// or a request that closes the connection.
    static func sluice(_ bytes: [UInt8]) -> Reading {
        var parser = HTTPRequestParser()
        var reading = Reading()
        var offset = 0
        while offset < bytes.count {
            let step: (length: Int, request: Reading.Request?, keepAlive: Bool, refusal: String?) = bytes.withUnsafeBytes { all in
                let window = UnsafeRawBufferPointer(rebasing: all[offset...])
                switch parser.parse(window) {
                case .incomplete:
                    return (0, nil, true, nil)
                case .refused(let problem):
                    return (0, nil, false, problem.slug)
                case .request(let parsed):
                    let view = HTTPRequestView(message: window, parsed: parsed)
                    var chunked = false
                    var length: Int?
                    switch parsed.body {
                    case .empty: length = nil
                    case .range(let range): length = range.count
                    case .chunked: chunked = true
                    }
                    let request = Reading.Request(
                        method: parsed.method.rawValue, target: latin1(view.targetBytes),
                        chunked: chunked, contentLength: length, body: view.withBody { Array($0) })
                    return (parsed.messageLength, request, parsed.keepAlive, nil)
                }
            }
            if let refusal = step.refusal {
                reading.refusal = refusal
                return reading
            }
            guard let request = step.request else {
                reading.incomplete = true
                return reading
            }
            reading.requests.append(request)
            offset += step.length
            if !step.keepAlive { return reading }
        }
        return reading
    }

    /// The cases: the corpus, then the generated set.
    static func cases() throws -> [(name: String, bytes: [UInt8])] {
        let data = try Data(contentsOf: directory.appendingPathComponent("corpus.json"))
        let corpus = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
        var cases: [(name: String, bytes: [UInt8])] = corpus.compactMap { entry in
            guard let name = entry["name"] as? String, let encoded = entry["bytes"] as? String,
                let bytes = Data(base64Encoded: encoded)
            else { return nil }
            return (name, Array(bytes))
        }
        cases += HTTPFramingCases.all.map { ($0.name, $0.bytes) }
        return cases
    }

    /// Runs the references over `cases`; their readings by case name, as `h11` and `llhttp`.
    static func references(_ cases: [(name: String, bytes: [UInt8])]) async throws -> [String: [String: Reading]] {
        let python = try #require(ChildProcess.executable(named: "python3"), "python3 is not installed")
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("sluice-differential-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let input = work.appendingPathComponent("corpus.json")
        let output = work.appendingPathComponent("results.json")
        let entries = cases.map { ["name": $0.name, "bytes": Data($0.bytes).base64EncodedString()] }
        try JSONSerialization.data(withJSONObject: entries).write(to: input)
        let process = try ChildProcess(
            python, [directory.appendingPathComponent("reference.py").path, input.path, output.path], captureStandardOutput: true)
        defer { process.stop() }
        let termination = try await process.waitForExit(seconds: 120)
        let log = try await process.errorOutput?.waitForEnd() ?? ""
        try #require(termination == .exited(0), "reference.py failed (h11 and llhttp are installed by scripts/install-deps.sh): \(log.suffix(2000))")
        let results = try JSONSerialization.jsonObject(with: Data(contentsOf: output)) as? [String: [String: Any]] ?? [:]
        var readings: [String: [String: Reading]] = [:]
        for (name, byParser) in results {
            for parser in ["h11", "llhttp"] {
                guard let result = byParser[parser] as? [String: Any] else { continue }
                var reading = Reading()
                for request in result["requests"] as? [[String: Any]] ?? [] {
                    reading.requests.append(
                        Reading.Request(
                            method: request["method"] as? String ?? "", target: request["target"] as? String ?? "",
                            chunked: request["chunked"] as? Bool ?? false, contentLength: request["content_length"] as? Int,
                            body: Array(Data(base64Encoded: request["body"] as? String ?? "") ?? Data())))
                }
                reading.refusal = result["error"] as? String
                reading.incomplete = result["incomplete"] as? Bool ?? false
                readings[name, default: [:]][parser] = reading
            }
        }
        return readings
    }

    @Test func sluiceNeverAcceptsWhatAReferenceRefusesAndReadsTheSameRequestsWhereBothAccept() async throws {
        let cases = try Self.cases()
        #expect(cases.count >= 500, "\(cases.count) cases")
        let references = try await Self.references(cases)
        var violations: [String] = []
        var stricterCases: [String] = []
        var agreed = 0
        for (name, bytes) in cases {
            let ours = Self.sluice(bytes)
            guard let theirs = references[name], theirs.count == 2 else {
                violations.append("\(name): no reference reading")
                continue
            }
            var refusedWhereAccepted: [String] = []
            for (parser, reading) in theirs.sorted(by: { $0.key < $1.key }) {
                let known = reading.requests.count
                // Accepting a message the reference refused.
                if reading.refusal != nil, ours.requests.count > known {
                    violations.append("\(name): Sluice accepted message \(known + 1), which \(parser) refused (\(reading.refusal ?? ""))")
                }
                // Reading a message both accepted differently.
                for index in 0..<min(ours.requests.count, known) {
                    let mine = ours.requests[index]
                    let other = reading.requests[index]
                    let sameFraming = mine.chunked == other.chunked && (other.contentLength == nil || (mine.body.count == other.contentLength && !mine.chunked))
                    if mine.method != other.method || mine.target != other.target || mine.body != other.body || !sameFraming {
                        violations.append("\(name): message \(index + 1) read differently from \(parser): \(mine) against \(other)")
                    }
                }
                // Waiting for bytes the reference read as a whole message.
                if ours.incomplete, known > ours.requests.count {
                    violations.append("\(name): Sluice waits for more of message \(ours.requests.count + 1), which \(parser) read whole")
                }
                if let slug = ours.refusal, known > ours.requests.count {
                    refusedWhereAccepted.append(parser)
                    if Self.stricter[slug] == nil {
                        violations.append("\(name): Sluice refused (\(slug)) a message \(parser) accepts, for no listed reason")
                    }
                }
            }
            if let slug = ours.refusal, !refusedWhereAccepted.isEmpty {
                stricterCases.append("\(name): \(slug), accepted by \(refusedWhereAccepted.joined(separator: " and ")) — \(Self.stricter[slug] ?? "unlisted")")
            } else if ours.refusal == nil {
                agreed += 1
            }
        }
        print("HTTP differential: \(cases.count) cases; \(violations.count) violations; Sluice stricter than a reference in \(stricterCases.count):")
        for line in stricterCases { print("  \(line)") }
        #expect(violations.isEmpty, "\(violations.count) violations:\n\(violations.joined(separator: "\n"))")
        #expect(agreed > 0)
    }
}

/// `bytes` as ISO-8859-1, as the reference runner decodes targets: byte 0xNN is U+00NN.
private func latin1(_ bytes: some Sequence<UInt8>) -> String {
    var scalars = String.UnicodeScalarView()
    scalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
    return String(scalars)
}
