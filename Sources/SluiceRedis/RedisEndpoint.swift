import Sluice

/// Where a Redis server listens, and which of its databases to use: `redis://host:port/db`.
///
/// ```swift
/// let endpoint = try RedisEndpoint(url: "redis://127.0.0.1:6379/2")
/// // endpoint.host == "127.0.0.1", endpoint.port == 6379, endpoint.database == 2
/// ```
///
/// The host is an IPv4 address, a name, or an IPv6 address in brackets (`redis://[::1]:6379`).
/// A name is resolved each time the connection connects, on the connection's loop, with the
/// system's resolver: prefer an address, or a name the hosts file answers, so that a slow DNS
/// server cannot hold the loop.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The port a URL without one means.
    public static let defaultPort = 6379

    /// The largest database number a URL may name (Redis keeps its count in a 32-bit integer).
    public static let maximumDatabase = Int(Int32.max)

    /// The server's address or name (an IPv6 address without its brackets).
    public let host: String
    /// The server's TCP port, 1...65535.
    public let port: Int
    /// The database the connection selects before anything else, 0 by default.
    public let database: Int

    /// An endpoint from its parts, taken as they are (``init(url:)`` checks a URL's).
    public init(host: String, port: Int = RedisEndpoint.defaultPort, database: Int = 0) {
        self.host = host
        self.port = port
        self.database = database
    }

    /// Parses `redis://host[:port][/db]`: the port defaults to 6379, the database to 0.
    ///
    /// - Throws: `SluiceError` with code `invalidOption` naming what is wrong: another
    ///   scheme (`rediss://` included: TLS is not supported), credentials, a missing or malformed
    ///   host, a port outside 1...65535, a database that is not a number in
    ///   0...``maximumDatabase``, a query or a fragment.
    public init(url: String) throws(SluiceError) {
        func invalid(_ message: String) -> SluiceError {
            SluiceError(code: .invalidOption, message: message, value: url)
        }
        let schemeEnd = url.firstRange(of: "://")
        guard let schemeEnd else {
            throw invalid("a Redis URL starts with redis://")
        }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "redis" else {
            if scheme == "rediss" { throw invalid("TLS (rediss://) is not supported; use redis://") }
            throw invalid("the scheme must be redis://, not \(scheme)://")
        }
        var rest = Substring(url[schemeEnd.upperBound...])
        if rest.contains("?") { throw invalid("query parameters are not supported") }
        if rest.contains("#") { throw invalid("a fragment is not supported") }

        // Authority, then an optional path.
        var authority = rest
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            path = rest[rest.index(after: slash)...]
        }
        rest = authority
        if rest.contains("@") { throw invalid("credentials in the URL are not supported") }

        // Host, bracketed for IPv6.
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw invalid("an IPv6 address must end with ]")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected :port after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard Self.isIPv6Literal(host) else { throw invalid("malformed IPv6 address: \(host)") }
        } else {
            if let colon = rest.firstIndex(of: ":") {
                host = rest[..<colon]
                portText = rest[rest.index(after: colon)...]
            } else {
                host = rest
            }
            guard !host.isEmpty else { throw invalid("the host is missing") }
            guard Self.isHostName(host) else {
                throw invalid("the host must be an IPv4 address, a name or a bracketed IPv6 address: \(host)")
            }
        }

        var port = Self.defaultPort
        if let portText {
            guard let parsed = Self.decimal(portText), (1...65535).contains(parsed) else {
                throw invalid("the port must be a number in 1...65535, not \"\(portText)\"")
            }
            port = parsed
        }

        var database = 0
        if !path.isEmpty {
            guard let parsed = Self.decimal(path), parsed <= Self.maximumDatabase else {
                throw invalid("the database must be a number in 0...\(Self.maximumDatabase), not \"\(path)\"")
            }
            database = parsed
        }
        self.init(host: String(host), port: port, database: database)
    }

    /// The endpoint as a URL, every part spelled out: `redis://host:port/db`.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "redis://\(shownHost):\(port)/\(database)"
    }

    /// Digits only (no sign, no spaces), at most 10 of them.
    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    /// Letters, digits, `-`, `.` and `_`: an IPv4 address or a DNS name.
    private static func isHostName(_ text: Substring) -> Bool {
        text.count <= 253
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }
            && !text.hasPrefix(".") && !text.hasPrefix("-")
    }

    /// Hex digits, colons and (for an embedded IPv4 tail) dots, with at least two colons.
    private static func isIPv6Literal(_ text: Substring) -> Bool {
        text.count <= 45 && text.filter { $0 == ":" }.count >= 2
            && text.allSatisfy { $0.isASCII && ($0.isHexDigit || $0 == ":" || $0 == ".") }
    }
}
