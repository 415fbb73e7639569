#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Polls `condition` until it holds, for up to `seconds` of wall time (times
/// ``deadlineScale``); throws if it never does. Between tries it pauses for a millisecond, so
/// that polling does not take the CPU from the loops it waits for; what a test checks depends on
/// the condition and the deadline only, never on the pause.
///
/// The condition is tried once more after the deadline: a task that resumes late (its threads
/// busy with other tests) finds a condition that came true while it was not running.
public func pollUntil(seconds: Int = 10, _ condition: () async throws -> Bool) async throws {
    let scaled = seconds * deadlineScale
    let deadline = ContinuousClock.now + .seconds(scaled)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(1))
    }
    if try await condition() { return }
    throw PollTimeout(seconds: scaled)
}

/// A condition ``pollUntil(seconds:_:)`` waited for did not hold in time.
public struct PollTimeout: Error, CustomStringConvertible {
    public let seconds: Int
    public var description: String { "condition not met in \(seconds) s" }
}

/// How many times longer a deadline of ``pollUntil(seconds:_:)`` is: 4 in a process built with
/// ThreadSanitizer or AddressSanitizer, 1 otherwise, or what `SLUICE_TEST_DEADLINE_SCALE` says.
/// A deadline only detects a hang (no test asserts how fast a condition comes); the whole suite
/// under a sanitizer runs several times slower, on the same two cores, and a condition that
/// comes after 10 s there is late, not lost.
public let deadlineScale: Int = {
    if let text = getenv("SLUICE_TEST_DEADLINE_SCALE").map({ String(cString: $0) }), let scale = Int(text), scale >= 1 {
        return scale
    }
    return runsUnderSanitizer ? 4 : 1
}()

/// Whether a sanitizer's runtime is in this process (its initialiser is a symbol of the process).
private let runsUnderSanitizer: Bool = {
    guard let process = dlopen(nil, RTLD_NOW) else { return false }
    defer { dlclose(process) }
    return dlsym(process, "__tsan_init") != nil || dlsym(process, "__asan_init") != nil
}()
