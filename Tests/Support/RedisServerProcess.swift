import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `redis-server` child process for tests, on a free loopback port, with its directory in a
/// temporary directory of its own.
///
/// By default it keeps nothing on disk (`--save "" --appendonly no`). With `persistent`, every
/// write is appended and synced before it is answered (`--appendonly yes --appendfsync
/// always`), so a server killed with ``kill()`` comes back from ``restart()`` with its data.
///
/// ```swift
/// let server = try await RedisServerProcess.start()
/// defer { server.stop() }
/// _ = try await server.command(["SET", "k", "v"])
/// ```
public final class RedisServerProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is read and written under `lock` (an `NSLock`, whose
    // pthread mutex ThreadSanitizer sees); everything else is immutable.

    /// What went wrong starting or talking to the server.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(_ description: String) {
            self.description = description
        }
    }

    /// The `redis-server` found on `PATH` (or in `/usr/bin`, `/usr/local/bin`,
    /// `/opt/homebrew/bin`), if any.
    public static let executablePath: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"]
        for directory in directories {
            let candidate = directory + "/redis-server"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }()

    /// Whether `redis-server` is installed.
    public static var isInstalled: Bool { executablePath != nil }

    /// The port it listens on, on 127.0.0.1 (the same after ``restart()``).
    public let port: Int
    /// Its working directory: append-only files and its log, `redis.log`.
    public let directory: URL
    /// Whether it keeps its data across ``kill()`` and ``restart()``.
    public let persistent: Bool

    private let executable: String
    private let lock = NSLock()
    private var process: ChildProcess?

    /// The server's URL, with `database`.
    public func url(database: Int = 0) -> String {
        "redis://127.0.0.1:\(port)/\(database)"
    }

    /// Starts a server and waits (up to `seconds`) until it answers `PING`.
    ///
    /// - Throws: ``Failure`` when `redis-server` is not installed, no port is free, it cannot
    ///   start, or it does not answer in time.
    public static func start(persistent: Bool = false, seconds: Int = 10) async throws -> RedisServerProcess {
        guard let executable = executablePath else { throw Failure("redis-server is not installed") }
        // redis-server takes its port as an option: a port found free can be taken by another
        // test's server before Redis binds it, and Redis then exits. Three tries, each with a
        // port of its own.
        var lastError: any Error = Failure("no free loopback port")
        for _ in 0..<3 {
            guard let port = freeLoopbackPort() else { continue }
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("sluice-redis-\(port)-\(UUID().uuidString)", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let server = RedisServerProcess(executable: executable, port: port, directory: directory, persistent: persistent)
            do {
                try server.launch()
                try await server.waitUntilReady(seconds: seconds)
                return server
            } catch {
                server.stop()
                lastError = error
            }
        }
        throw lastError
    }

    private init(executable: String, port: Int, directory: URL, persistent: Bool) {
        self.executable = executable
        self.port = port
        self.directory = directory
        self.persistent = persistent
    }

    deinit {
        stop()
    }

    private func launch() throws {
        var arguments = [
            "--port", String(port), "--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no",
            "--dir", directory.path, "--logfile", directory.appendingPathComponent("redis.log").path,
            "--save", "",
        ]
        if persistent {
            arguments += ["--appendonly", "yes", "--appendfsync", "always"]
        } else {
            arguments += ["--appendonly", "no"]
        }
        let process = try ChildProcess(executable, arguments)
        lock.withLock { self.process = process }
    }

    /// Polls `PING` until the server answers `PONG` (not `-LOADING`), for up to `seconds`.
    public func waitUntilReady(seconds: Int = 10) async throws {
        do {
            try await pollUntil(seconds: seconds) {
                guard isRunning else { throw Failure("redis-server exited; see \(directory.path)/redis.log") }
                return (try? await command(["PING"], timeoutSeconds: 1)) == "PONG"
            }
        } catch let timeout as PollTimeout {
            throw Failure("redis-server on port \(port) did not answer PING: \(timeout)")
        }
    }

    /// Whether the process is running.
    public var isRunning: Bool {
        lock.withLock { process?.isRunning ?? false }
    }

    /// Kills the server with SIGKILL (no shutdown, no final save) and waits for it to exit.
    public func kill() {
        let process = lock.withLock { () -> ChildProcess? in
            defer { self.process = nil }
            return self.process
        }
        process?.stop()
    }

    /// Stops the server with SIGSTOP (it keeps its connections but answers nothing) until
    /// ``resume()``.
    public func pause() {
        lock.withLock { process }?.signal(SIGSTOP)
    }

    /// Lets a server paused by ``pause()`` run again.
    public func resume() {
        lock.withLock { process }?.signal(SIGCONT)
    }

    /// Starts the server again on the same port and directory (after ``kill()``), and waits
    /// until it answers.
    public func restart(seconds: Int = 10) async throws {
        kill()
        try launch()
        try await waitUntilReady(seconds: seconds)
    }

    /// Kills the server and removes its directory.
    public func stop() {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Sends one command on a connection of its own (selecting `database` first when it is not
    /// 0) and returns the reply as text: a status's text, an integer's digits, a bulk string,
    /// or `nil` for a null. An error reply throws ``Failure``; arrays are not supported.
    public func command(_ arguments: [String], database: Int = 0, timeoutSeconds: Int = 5) async throws -> String? {
        let client = try LineClient(port: port, timeoutSeconds: timeoutSeconds)
        var request: [UInt8] = []
        if database != 0 {
            request += Self.encode(["SELECT", String(database)])
        }
        request += Self.encode(arguments)
        try client.send(request)
        return try await client.readOffThread {
            if database != 0 { _ = try Self.readReply(client) }
            return try Self.readReply(client)
        }
    }

    /// A command in RESP: an array of bulk strings.
    private static func encode(_ arguments: [String]) -> [UInt8] {
        var bytes = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            let utf8 = Array(argument.utf8)
            bytes += Array("$\(utf8.count)\r\n".utf8) + utf8 + Array("\r\n".utf8)
        }
        return bytes
    }

    private static func readReply(_ client: LineClient) throws -> String? {
        let line = try client.readLineBlockingWithoutCR()
        guard let kind = line.first else { throw Failure("empty reply line") }
        let rest = String(line.dropFirst())
        switch kind {
        case "+", ":":
            return rest
        case "-":
            throw Failure("error reply: \(rest)")
        case "$":
            guard let length = Int(rest) else { throw Failure("bad bulk length: \(line)") }
            if length < 0 { return nil }
            let bytes = try client.readExactlyBlocking(length + 2)
            return String(decoding: bytes.prefix(length), as: UTF8.self)
        default:
            throw Failure("unsupported reply: \(line)")
        }
    }
}
