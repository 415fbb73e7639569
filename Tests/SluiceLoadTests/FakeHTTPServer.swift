import Foundation
import SluiceLibevent
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny in-test HTTP/1.1 server speaking sluice-echo's HTTP routes well enough for the load
/// tool: `POST /echo`, `POST /tap/<key>` (never throttles), `POST /pay` (idempotent per (key,
/// Idempotency-Key): one charge, duplicates replayed with `Idempotent-Replayed: true`),
/// `GET /search/<key>?q=`, `GET /metrics` (the counters with labels on one, none on the other).
/// Keep-alive, pipelined requests answered in order. A `Fault` makes it misbehave in one precise
/// way, for checks that must fail.
///
/// Written with blocking sockets and a thread per connection, independently of the client's
/// libevent code and of its request encoder and response parser, so it checks them rather than
/// mirroring them.
final class FakeHTTPServer: Sendable {
    enum Fault: Sendable, Equatable {
        case none
        /// Every PAY charges anew (no idempotency): a double charge for every duplicate.
        case chargeEveryPay
        /// Every n-th response (over all connections) carries `Connection: close`, then the
        /// server closes that connection.
        case closeEvery(Int)
        /// The n-th response is not HTTP.
        case malformedResponse(Int)
        /// The n-th request gets no response: the server closes its connection instead.
        case hangUp(Int)
        /// TAP answers `500 internal`.
        case errorOnTap
        /// TAP answers `503 busy`.
        case busyOnTap
        /// Every response is written in small pieces, one `send` each.
        case trickle
    }

    /// A step of setting the server up failed.
    struct SetupError: Error {
        var step: String
        init(_ step: String) { self.step = step }
    }

    private struct Ledger: Sendable {
        var charges: [String: String] = [:]
        var payments = 0
        var taps = 0
    }

    let fault: Fault
    let port: Int
    private let listener: Int32
    private let ledger = Mutex(Ledger())
    private let responses = Atomic<Int>(0)
    private let requests = Atomic<Int>(0)
    /// Connections that sent a request other than `GET /metrics` (the load's, not the probes').
    let loadConnections = Atomic<Int>(0)
    /// Requests whose `Host` field does not name this server's address and port.
    let misdirectedRequests = Atomic<Int>(0)
    /// Open connection sockets, to shut down when the server stops.
    private let sockets = Mutex(Set<Int32>())
    /// Whether `stop()` was called, whether the accept loop has ended, and whether the listener
    /// is closed: it is closed once, by whichever of the two comes last, so that neither touches
    /// a descriptor number the process may have given to another socket since.
    private let listening = Mutex((stopping: false, loopEnded: false, closed: false))

    /// Listens on a free port of 127.0.0.1 and starts accepting.
    init(fault: Fault) throws {
        self.fault = fault
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw SetupError("socket") }
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 128) == 0 else {
            close(listener)
            throw SetupError("bind/listen")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        self.port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in acceptLoop() }.start()
    }

    /// Stops accepting and shuts every connection down (their threads then end).
    func stop() {
        let closeNow = listening.withSanitizedLock { state -> Bool? in
            guard !state.stopping else { return nil }
            state.stopping = true
            guard state.loopEnded else { return false }
            state.closed = true
            return true
        }
        switch closeNow {
        case true?: close(listener)
        // The accept loop wakes with an error, sees the stop and closes the listener.
        case false?: shutdown(listener, Int32(SHUT_RDWR))
        case nil: break
        }
        sockets.withSanitizedLock { open in
            for socket in open { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                // A signal, or a connection reset before it was accepted: accept the next one.
                if errno == EINTR || errno == ECONNABORTED || errno == EPROTO { continue }
                let closeNow = listening.withSanitizedLock { state -> Bool in
                    state.loopEnded = true
                    guard state.stopping, !state.closed else { return false }
                    state.closed = true
                    return true
                }
                if closeNow { close(listener) }
                return
            }
            // Small writes go out at once (`.trickle` writes many).
            var one: Int32 = 1
            setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if canImport(Darwin)
            setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            sockets.withSanitizedLock { _ = $0.insert(client) }
            Thread { [self] in serve(client) }.start()
        }
    }

    // MARK: One connection

    private func serve(_ socket: Int32) {
        defer {
            sockets.withSanitizedLock { _ = $0.remove(socket) }
            close(socket)
        }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        var counted = false
        while true {
            // Answer every whole request buffered, in order.
            while let (request, length) = FakeHTTPRequest.parse(buffer) {
                buffer.removeFirst(length)
                if !counted && !(request.method == "GET" && request.path == "/metrics") {
                    counted = true
                    loadConnections.wrappingAdd(1, ordering: .relaxed)
                }
                if request.fields["host"] != "127.0.0.1:\(port)" { misdirectedRequests.wrappingAdd(1, ordering: .relaxed) }
                let number = requests.wrappingAdd(1, ordering: .relaxed).newValue
                if case .hangUp(let hungUp) = fault, hungUp == number { return }
                guard respond(to: request, on: socket) else {
                lingeringClose(socket)
                return
            }
            }
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    /// Closes after a response the way an HTTP server should (RFC 9112, section 9.6): stop
    /// sending, then read (and drop) what the client still sends until it closes, so requests
    /// it pipelined behind do not make the kernel answer with a reset, which could destroy the
    /// last response before the client reads it.
    private func lingeringClose(_ socket: Int32) {
        shutdown(socket, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = sink.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
        }
    }

    /// Writes the response to `request`; `false` when the connection must close.
    private func respond(to request: FakeHTTPRequest, on socket: Int32) -> Bool {
        let number = responses.wrappingAdd(1, ordering: .relaxed).newValue
        if case .malformedResponse(let bad) = fault, bad == number {
            _ = send(Array("HTTP/1.1 OK 200\r\n\r\n".utf8), on: socket)
            return false
        }
        var (status, fields, body) = route(request)
        var closes = false
        if case .closeEvery(let every) = fault, number % every == 0 {
            fields.append(("Connection", "close"))
            closes = true
        }
        var head = "HTTP/1.1 \(status)\r\n"
        for (name, value) in fields { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + body
        guard send(bytes, on: socket) else { return false }
        return !closes
    }

    private func send(_ bytes: [UInt8], on socket: Int32) -> Bool {
        let piece = fault == .trickle ? 7 : bytes.count
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + piece, bytes.count)
            let sent = bytes[offset..<end].withUnsafeBytes { socketSend(socket, $0) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    // MARK: Routes

    private func route(_ request: FakeHTTPRequest) -> (String, [(String, String)], [UInt8]) {
        let json = [("Content-Type", "application/json")]
        switch (request.method, request.path) {
        case ("POST", "/echo"):
            return ("200 OK", [("Content-Type", "application/octet-stream")], request.body)
        case ("POST", let path) where path.hasPrefix("/tap/"):
            if fault == .errorOnTap { return problem("500 Internal Server Error", "internal") }
            if fault == .busyOnTap { return problem("503 Service Unavailable", "busy") }
            let taps = ledger.withSanitizedLock { $0.taps += 1; return $0.taps }
            return ("200 OK", json, Array(#"{"tap":\#(taps)}"#.utf8))
        case ("POST", "/pay"):
            return pay(request)
        case ("GET", let path) where path.hasPrefix("/search/"):
            guard let query = request.query["q"] else { return problem("400 Bad Request", "bad-query") }
            return ("200 OK", json, Array(#"{"results":"\#(jsonEscaped(query))"}"#.utf8))
        case ("GET", "/metrics"):
            let snapshot = ledger.withSanitizedLock { $0 }
            let text = """
                # TYPE sluice_payments_total counter
                sluice_payments_total{plugin="pay"} \(snapshot.payments)
                # TYPE sluice_declines_total counter
                sluice_declines_total 0
                sluice_taps_total \(snapshot.taps)

                """
            return ("200 OK", [("Content-Type", "text/plain; version=0.0.4")], Array(text.utf8))
        default:
            return problem("404 Not Found", "not-found")
        }
    }

    private func pay(_ request: FakeHTTPRequest) -> (String, [(String, String)], [UInt8]) {
        guard let quoted = request.fields["idempotency-key"], quoted.count >= 3, quoted.hasPrefix("\""), quoted.hasSuffix("\"") else {
            return problem("400 Bad Request", "missing-idempotency-key")
        }
        let idem = String(quoted.dropFirst().dropLast())
        let body = String(decoding: request.body, as: UTF8.self)
        guard let key = field(#""key":""#, in: body, until: "\""), let amount = field(#""amount":"#, in: body, until: "}") else {
            return problem("400 Bad Request", "bad-json")
        }
        let (charge, replayed) = ledger.withSanitizedLock { ledger -> (String, Bool) in
            let record = key + " " + idem
            if fault != .chargeEveryPay, let known = ledger.charges[record] { return (known, true) }
            ledger.payments += 1
            let charge = "ch\(ledger.payments)"
            ledger.charges[record] = charge
            return (charge, false)
        }
        var fields = [("Content-Type", "application/json")]
        if replayed { fields.append(("Idempotent-Replayed", "true")) }
        return ("201 Created", fields, Array(#"{"charge":"\#(charge)","amount":\#(amount)}"#.utf8))
    }

    private func problem(_ status: String, _ slug: String) -> (String, [(String, String)], [UInt8]) {
        let code = status.prefix(3)
        let body = #"{"type":"urn:sluice:problem:\#(slug)","title":"\#(status.dropFirst(4))","status":\#(code),"detail":"fake"}"#
        return (status, [("Content-Type", "application/problem+json")], Array(body.utf8))
    }

    /// The text after `marker` in `text` up to `terminator`.
    private func field(_ marker: String, in text: String, until terminator: Character) -> String? {
        guard let start = text.range(of: marker)?.upperBound else { return nil }
        guard let end = text[start...].firstIndex(of: terminator) else { return nil }
        return String(text[start..<end])
    }

    private func jsonEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}

/// `send` without SIGPIPE (the peer may have closed), under a name the server's own `send`
/// does not shadow.
private func socketSend(_ socket: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
    #if canImport(Darwin)
    let flags: Int32 = 0
    #else
    let flags = Int32(MSG_NOSIGNAL)
    #endif
    return send(socket, bytes.baseAddress, bytes.count, flags)
}

/// Runs `body` with a fake HTTP server listening on a free port.
func withFakeHTTPServer(_ fault: FakeHTTPServer.Fault, _ body: (Int) async throws -> Void) async throws {
    let server = try FakeHTTPServer(fault: fault)
    defer { server.stop() }
    try await body(server.port)
}
