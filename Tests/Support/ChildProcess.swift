import CSluiceTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process for tests (`sluice-echo`, `redis-server`), started with `posix_spawn`.
///
/// Tests do not use Foundation's `Process`: under AddressSanitizer its `run()` overflows a buffer
/// inside the toolchain's Foundation, and the sanitized run aborts. Standard input is /dev/null,
/// standard output is discarded, and standard error is discarded or captured (``errorOutput``).
///
/// ```swift
/// let server = try ChildProcess(path, ["--port", "0"], captureErrorOutput: true)
/// defer { server.stop() }
/// let line = try await server.errorOutput!.waitForLine(containing: "listening")
/// ```
public final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: `exit` is read and written under `lock`; everything else is immutable.

    /// How a child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled(Int32)

        public var description: String {
            switch self {
            case .exited(let status): "exit status \(status)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    /// The executable named `name` on `PATH` (or in `/usr/bin`, `/usr/local/bin`), if any.
    public static func executable(named name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The child's process id.
    public let pid: pid_t
    /// The executable's path.
    public let path: String
    /// What the child writes to standard error, when it is captured.
    public let errorOutput: CapturedOutput?

    private let lock = NSLock()
    private var exit: Termination?

    /// Starts `path` with `arguments` and this process's environment. With
    /// `captureErrorOutput`, standard error is kept in ``errorOutput``; with
    /// `captureStandardOutput` too, standard output goes there as well (else it is discarded).
    ///
    /// - Throws: ``LineClient/Failure`` when the executable cannot be started.
    public init(_ path: String, _ arguments: [String], captureErrorOutput: Bool = false, captureStandardOutput: Bool = false) throws {
        self.path = path
        let captureErrorOutput = captureErrorOutput || captureStandardOutput
        var pipeEnds: [Int32] = [-1, -1]
        if captureErrorOutput {
            let failure = pipeEnds.withUnsafeMutableBufferPointer { sluice_test_pipe($0.baseAddress!) }
            guard failure == 0 else {
                throw LineClient.Failure(description: "pipe2 failed: errno \(failure)")
            }
        }
        var child: pid_t = 0
        let argv = ([path] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let envp = Self.childEnvironment.map { strdup($0) }
        defer { envp.forEach { free($0) } }
        let failure = (argv + [nil]).withUnsafeBufferPointer { arguments in
            (envp + [nil]).withUnsafeBufferPointer { environment in
                sluice_test_spawn(
                    path, arguments.baseAddress!, environment.baseAddress!, captureStandardOutput ? pipeEnds[1] : -1,
                    pipeEnds[1], &child)
            }
        }
        if captureErrorOutput { close(pipeEnds[1]) }
        guard failure == 0 else {
            if captureErrorOutput { close(pipeEnds[0]) }
            throw LineClient.Failure(description: "cannot start \(path): \(String(cString: strerror(failure)))")
        }
        pid = child
        errorOutput = captureErrorOutput ? CapturedOutput(reading: pipeEnds[0]) : nil
    }

    deinit {
        stop()
    }

    /// What LeakSanitizer must not report in a child built with `--sanitize=address` (a
    /// `sluice-echo` the tests start): a Swift object that is still alive when the process exits
    /// and was once weakly referenced keeps a side table, and once the weak references are gone
    /// only the object's reference-count field points to it, shifted and tagged, which
    /// LeakSanitizer cannot read as a pointer. The side table is reported as a direct leak,
    /// allocated in `formWeakReference`; the object itself, if leaked, is still reported.
    static let childLeakSuppressions = "leak:formWeakReference\n"

    /// This process's environment, with ``childLeakSuppressions`` added to `LSAN_OPTIONS`
    /// (written to a file once: LeakSanitizer reads suppressions from a file only).
    static let childEnvironment: [String] = {
        var environment = ProcessInfo.processInfo.environment
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sluice-child-lsan-\(getpid()).supp")
        if (try? childLeakSuppressions.write(to: file, atomically: true, encoding: .utf8)) != nil {
            let existing = environment["LSAN_OPTIONS"].map { $0 + ":" } ?? ""
            environment["LSAN_OPTIONS"] = existing + "suppressions=\(file.path)"
        }
        return environment.map { "\($0.key)=\($0.value)" }
    }()

    /// How it ended, if it has (reaps it without waiting).
    public var termination: Termination? {
        reap(blocking: false)
    }

    /// Whether it is still running.
    public var isRunning: Bool { termination == nil }

    /// Whether `/proc` shows the threads of processes, so that ``isStopped`` can see a stop.
    public static var canSeeStops: Bool { FileManager.default.fileExists(atPath: "/proc/self/task") }

    /// Whether every thread of it is stopped now (by SIGSTOP), as Linux's `/proc` shows them
    /// (the state after the command's name in each thread's `stat` is `T`); `false` where there
    /// is no `/proc` (see ``canSeeStops``).
    public var isStopped: Bool {
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return !threads.isEmpty && threads.allSatisfy { thread in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/stat", encoding: .utf8),
                let nameEnd = stat.lastIndex(of: ")")
            else { return false }
            return stat[nameEnd...].dropFirst().drop { $0 == " " }.first == "T"
        }
    }

    /// Sends `signal` unless it has already ended.
    public func signal(_ signal: Int32) {
        guard isRunning else { return }
        _ = kill(pid, signal)
    }

    /// Waits (polling, without holding a thread) until it ends, for up to `seconds`.
    ///
    /// - Throws: ``PollTimeout`` when it is still running at the deadline.
    @discardableResult
    public func waitForExit(seconds: Int = 20) async throws -> Termination {
        try await pollUntil(seconds: seconds) { !isRunning }
        guard let termination else { throw PollTimeout(seconds: seconds) }
        return termination
    }

    /// Ends it with SIGKILL (when still running) and reaps it: no shutdown, nothing left behind.
    public func stop() {
        guard isRunning else { return }
        _ = kill(pid, SIGKILL)
        _ = reap(blocking: true)
    }

    /// Sends SIGTERM and waits, blocking this thread, until it ends. A stopped process (SIGSTOP)
    /// is continued too, or the SIGTERM would stay pending and the wait would never end.
    @discardableResult
    public func terminateAndWait() -> Termination? {
        signal(SIGTERM)
        signal(SIGCONT)
        return reap(blocking: true)
    }

    private func reap(blocking: Bool) -> Termination? {
        lock.lock()
        defer { lock.unlock() }
        if let exit { return exit }
        var status: Int32 = 0
        var reaped: pid_t
        repeat {
            reaped = waitpid(pid, &status, blocking ? 0 : WNOHANG)
        } while reaped < 0 && errno == EINTR
        guard reaped == pid else { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
        let signal = status & 0x7f
        exit = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
        return exit
    }
}

/// A child's standard error, read to its end by a thread of its own and kept in memory.
public final class CapturedOutput: @unchecked Sendable {
    // @unchecked Sendable: `bytes` and `ended` are read and written under `lock`.
    private let lock = NSCondition()
    private var bytes: [UInt8] = []
    private var ended = false

    init(reading descriptor: Int32) {
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                lock.lock()
                if count > 0 {
                    bytes += chunk[0..<count]
                    lock.unlock()
                    continue
                }
                ended = true
                lock.broadcast()
                lock.unlock()
                close(descriptor)
                return
            }
        }
        thread.start()
    }

    /// What has been read so far.
    public var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether the writer has closed its end (the child and its children have exited).
    public var isComplete: Bool {
        lock.lock()
        defer { lock.unlock() }
        return ended
    }

    /// Waits until a line containing `fragment` has been written, and returns it.
    ///
    /// - Throws: ``LineClient/Failure`` when the output ends without one, ``PollTimeout`` at the
    ///   deadline.
    public func waitForLine(containing fragment: String, seconds: Int = 20) async throws -> String {
        var found: String?
        try await pollUntil(seconds: seconds) {
            let complete = isComplete
            found = text.split(separator: "\n").first { $0.contains(fragment) }.map(String.init)
            if found == nil && complete {
                throw LineClient.Failure(description: "the output ended without a line containing \"\(fragment)\": \(text.suffix(800))")
            }
            return found != nil
        }
        return found ?? ""
    }

    /// The port of the first line containing `fragment` (a server's "listening" log line, with
    /// `port=<n>` in its metadata), waiting up to `seconds` for it.
    ///
    /// - Throws: ``LineClient/Failure`` when the line has no port.
    public func waitForPort(listening fragment: String, seconds: Int = 20) async throws -> Int {
        let line = try await waitForLine(containing: fragment, seconds: seconds)
        guard let range = line.range(of: "port="), let port = Int(line[range.upperBound...].prefix { $0.isNumber }) else {
            throw LineClient.Failure(description: "no port in: \(line)")
        }
        return port
    }

    /// Every report a sanitizer wrote (a child built with `--sanitize` reports there, not in
    /// the test's own output), each its first line and up to 40 lines of stacks after it, so
    /// that a failed run shows where: empty when there is none.
    public var sanitizerReports: [String] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return lines.indices.filter { index in
            let line = lines[index]
            return line.contains("WARNING: ThreadSanitizer") || line.contains("ERROR: AddressSanitizer")
                || line.contains("ERROR: LeakSanitizer") || line.contains("runtime error:")
        }.map { index in
            lines[index..<min(index + 41, lines.endIndex)].joined(separator: "\n")
        }
    }

    /// Blocks this thread until the output has ended (the child has exited), for up to
    /// `seconds`; returns whether it has.
    @discardableResult
    public func waitForEndBlocking(seconds: Int = 5) -> Bool {
        let deadline = Date(timeIntervalSinceNow: TimeInterval(seconds))
        lock.lock()
        defer { lock.unlock() }
        while !ended {
            if !lock.wait(until: deadline) { break }
        }
        return ended
    }

    /// Everything written, once the output has ended (up to `seconds`).
    public func waitForEnd(seconds: Int = 20) async throws -> String {
        try await pollUntil(seconds: seconds) { isComplete }
        return text
    }
}
