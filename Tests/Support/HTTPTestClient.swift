/// An HTTP/1.1 client for tests, over one keep-alive connection: sends a request, reads the
/// response (status line, header fields, a `Content-Length` body).
public final class HTTPTestClient: Sendable {
    /// A response as read off the wire.
    public struct Response: Sendable, CustomStringConvertible {
        /// The status code.
        public let status: Int
        /// The reason phrase.
        public let reason: String
        /// The header fields, in order, names as sent.
        public let fields: [(name: String, value: String)]
        /// The body.
        public let body: [UInt8]

        /// The value of the first field named `name` (case-insensitive).
        public func field(_ name: String) -> String? {
            fields.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        /// Every value of the fields named `name`.
        public func fields(_ name: String) -> [String] {
            fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }

        /// The body as text.
        public var text: String { String(decoding: body, as: UTF8.self) }

        public var description: String { "\(status) \(reason) \(fields) \(text)" }
    }

    /// The connection.
    public let connection: LineClient

    /// Connects to `port` on loopback; reads time out as ``LineClient``'s do.
    public init(port: Int, timeoutSeconds: Int = 15) throws {
        connection = try LineClient(port: port, timeoutSeconds: timeoutSeconds)
    }

    /// The bytes of a request.
    public static func requestBytes(
        _ method: String, _ target: String, fields: [(String, String)] = [], body: [UInt8] = []
    ) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        for (name, value) in fields { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    /// Sends a request without reading its response.
    public func send(_ method: String, _ target: String, fields: [(String, String)] = [], body: String = "") throws {
        try connection.send(Self.requestBytes(method, target, fields: fields, body: Array(body.utf8)))
    }

    /// Reads one response; `toHead`: the response to a HEAD request, which has no body whatever
    /// its `Content-Length` says.
    public func readResponse(toHead: Bool = false) async throws -> Response {
        let connection = self.connection
        return try await connection.readOffThread { try Self.readBlocking(connection, toHead: toHead) }
    }

    /// Sends a request and reads its response.
    public func request(_ method: String, _ target: String, fields: [(String, String)] = [], body: String = "") async throws -> Response {
        try send(method, target, fields: fields, body: body)
        return try await readResponse()
    }

    private static func readBlocking(_ connection: LineClient, toHead: Bool) throws -> Response {
        let statusLine = try connection.readLineBlockingWithoutCR()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw LineClient.Failure(description: "bad status line: \(statusLine)")
        }
        var fields: [(name: String, value: String)] = []
        while true {
            let line = try connection.readLineBlockingWithoutCR()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw LineClient.Failure(description: "bad field: \(line)") }
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            fields.append((String(line[..<colon]), String(value)))
        }
        let length = fields.first { $0.name.lowercased() == "content-length" }.flatMap { Int($0.value) } ?? 0
        let body = toHead ? [] : try connection.readExactlyBlocking(length)
        return Response(status: status, reason: parts.count > 2 ? String(parts[2]) : "", fields: fields, body: body)
    }
}
