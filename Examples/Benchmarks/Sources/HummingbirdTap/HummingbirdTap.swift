import ArgumentParser
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hummingbird-tap`: `POST /tap/<key>` on Hummingbird 2, the framework baseline that
/// sluice-echo's HTTP front is compared with (`Examples/Benchmarks/http-compare.sh`, scenario 6
/// of `Examples/LoadTest/run.sh`). The same route, decisions and bytes as the C baseline
/// `evhttp-tap` (`Examples/Benchmarks/Baselines/evhttp_tap.c`):
///
/// - a per-key leading-edge throttle: a tap for key k at time t runs iff none ran in
///   (t − window, t]; the table maps each key to its last run (monotonic clock) and its count of
///   taps that ran;
/// - run: `200 {"tap":<n>}` (`application/json`); throttled: `429` problem `throttled`
///   (`application/problem+json`, `Retry-After`); both with `RateLimit-Policy` and `RateLimit`;
/// - the key is the rest of the path, percent-decoded; one that is not then 1–128 bytes of
///   visible ASCII: `400` problem `bad-key`; another method on `/tap/…`: `405` problem
///   `method-not-allowed` (`Allow: POST`); any other path: `404` problem `not-found`.
///
/// The table is one `Mutex<[String: Entry]>` (one lookup per request); past `maxKeys` keys a new
/// key first drops the entries older than the window.
@main
struct HummingbirdTap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hummingbird-tap", abstract: "Hummingbird 2 POST /tap/<key> server (a benchmark baseline).")

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "TCP port (0: any free port).")
    var port = 8082

    @Option(help: "Throttle window in milliseconds.")
    var windowMs = 1000

    @Option(help: "Event loop threads.")
    var threads = 1

    @Flag(help: "Run Swift Concurrency's global executor on the event loops (SwiftNIO's takeover), so that the handlers run on the --threads loop threads too.")
    var handlersOnLoops = false

    func validate() throws {
        guard windowMs > 0 else { throw ValidationError("--window-ms must be 1 or more") }
        guard threads > 0 else { throw ValidationError("--threads must be 1 or more") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
    }

    func run() async throws {
        let taps = TapTable(windowNanos: UInt64(windowMs) * 1_000_000)
        let router = Router()
        router.add(middleware: ProblemNotFoundMiddleware())
        router.post("/tap/**") { request, _ -> Response in
            guard let key = tapKey(request.uri.path.utf8.dropFirst(5)) else {
                return Problem.response(.badRequest, Problem.badKey)
            }
            return taps.tap(key, now: monotonicNanos())
        }
        let group: MultiThreadedEventLoopGroup
        if handlersOnLoops {
            NIOSingletons.groupLoopCountSuggestion = threads
            guard NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() else {
                throw ValidationError("--handlers-on-loops is not supported here")
            }
            group = MultiThreadedEventLoopGroup.singleton
        } else {
            group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        }
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), backlog: 1024),
            eventLoopGroupProvider: .shared(group)
        )
        try await app.runService()
        if !handlersOnLoops { try await group.shutdownGracefully() }
    }
}

/// Key → last run and count, behind one lock.
final class TapTable: Sendable {
    struct Entry {
        var last: UInt64
        var count: Int
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Past this many keys a new key first drops the entries older than the window.
        var pruneAt = TapTable.maxKeys
    }

    static let maxKeys = 1 << 20

    private let windowNanos: UInt64
    private let state = Mutex(State())
    private let policy: String
    /// `RateLimit` of a tap that ran: nothing left for a window.
    private let ranLimit: String

    init(windowNanos: UInt64) {
        self.windowNanos = windowNanos
        let windowSeconds = max(1, (windowNanos + 999_999_999) / 1_000_000_000)
        policy = "\"tap\";q=1;w=\(windowSeconds)"
        ranLimit = "\"tap\";r=0;t=\(windowSeconds)"
    }

    private enum Decision {
        case ran(Int)
        case throttled(retryNanos: UInt64)
    }

    func tap(_ key: String, now: UInt64) -> Response {
        let window = windowNanos
        let decision: Decision = state.withLock { state in
            if let index = state.entries.index(forKey: key) {
                let last = state.entries.values[index].last
                if now &- last < window { return .throttled(retryNanos: last &+ window &- now) }
                state.entries.values[index].last = now
                state.entries.values[index].count += 1
                return .ran(state.entries.values[index].count)
            }
            if state.entries.count >= state.pruneAt {
                state.entries = state.entries.filter { now &- $0.value.last < window }
                state.pruneAt = max(Self.maxKeys, 2 * state.entries.count)
            }
            state.entries[key] = Entry(last: now, count: 1)
            return .ran(1)
        }
        var headers = HTTPFields()
        headers.reserveCapacity(6)
        switch decision {
        case .ran(let count):
            headers[.contentType] = "application/json"
            headers[.rateLimitPolicy] = policy
            headers[.rateLimit] = ranLimit
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "{\"tap\":\(count)}")))
        case .throttled(let retryNanos):
            let retry = max(1, Int((retryNanos + 999_999_999) / 1_000_000_000))
            headers[.contentType] = "application/problem+json"
            headers[.retryAfter] = String(retry)
            headers[.rateLimitPolicy] = policy
            headers[.rateLimit] = "\"tap\";r=0;t=\(retry)"
            return Response(status: .tooManyRequests, headers: headers, body: .init(byteBuffer: Problem.throttled))
        }
    }
}

/// The key of `POST /tap/<key>`: the rest of the path, percent-decoded, which must then be 1–128
/// bytes of visible ASCII (0x21–0x7E), as a line-protocol key; nil if it is not.
func tapKey(_ rest: Substring.UTF8View) -> String? {
    guard rest.contains(UInt8(ascii: "%")) else {
        guard (1...128).contains(rest.count), rest.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
        return String(Substring(rest))
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(rest.count)
    var iterator = rest.makeIterator()
    while let byte = iterator.next() {
        if byte == UInt8(ascii: "%") {
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        } else {
            bytes.append(byte)
        }
    }
    guard (1...128).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
    return String(decoding: bytes, as: UTF8.self)
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// The problem bodies, byte for byte those of `evhttp-tap` (and of sluice-echo's HTTP front).
enum Problem {
    static let throttled = ByteBuffer(
        string: #"{"type":"urn:sluice:problem:throttled","title":"Too Many Requests","status":429,"detail":"this key was used less than a window ago"}"#)
    static let badKey = ByteBuffer(
        string: #"{"type":"urn:sluice:problem:bad-key","title":"Bad Request","status":400,"detail":"a key is 1 to 128 bytes of visible ASCII, percent-encoded in a path"}"#)
    static let methodNotAllowed = ByteBuffer(
        string: #"{"type":"urn:sluice:problem:method-not-allowed","title":"Method Not Allowed","status":405,"detail":"this path answers POST"}"#)

    static func notFound(method: HTTPRequest.Method, path: String) -> ByteBuffer {
        var detail = "no route for \(method.rawValue) "
        for scalar in path.unicodeScalars {
            switch scalar {
            case "\"": detail += #"\""#
            case "\\": detail += #"\\"#
            case "\n": detail += #"\n"#
            case "\r": detail += #"\r"#
            case "\t": detail += #"\t"#
            case "\u{0}"..."\u{1F}":
                let hex = String(scalar.value, radix: 16)
                detail += #"\u00"# + (hex.count == 1 ? "0" : "") + hex
            default: detail.unicodeScalars.append(scalar)
            }
        }
        return ByteBuffer(string: #"{"type":"urn:sluice:problem:not-found","title":"Not Found","status":404,"detail":""# + detail + #""}"#)
    }

    static func response(_ status: HTTPResponse.Status, _ body: ByteBuffer, allow: String? = nil) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/problem+json"
        if let allow { headers[.allow] = allow }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}

/// The router's unmatched requests: another method on `/tap/…` answers `405` (`Allow: POST`),
/// `POST /tap/` (no key) `400` `bad-key`, any other `404` `not-found`, as sluice-echo does.
struct ProblemNotFoundMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let path = request.uri.path
            if path.hasPrefix("/tap/") {
                if request.method == .post { return Problem.response(.badRequest, Problem.badKey) }
                return Problem.response(.methodNotAllowed, Problem.methodNotAllowed, allow: "POST")
            }
            return Problem.response(.notFound, Problem.notFound(method: request.method, path: path))
        }
    }
}

extension HTTPField.Name {
    static let rateLimitPolicy = HTTPField.Name(token: "RateLimit-Policy")
    static let rateLimit = HTTPField.Name(token: "RateLimit")

    /// The name `token`, a literal of this file (a valid field name by construction).
    private init(token: StaticString) {
        guard let name = HTTPField.Name(token.description) else {
            preconditionFailure("\(token) is not an HTTP field-name token")
        }
        self = name
    }
}

/// Nanoseconds of the monotonic clock (`CLOCK_MONOTONIC`), as the C baseline reads it.
func monotonicNanos() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}
