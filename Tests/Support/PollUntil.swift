/// Polls `condition` until it holds, for up to `seconds` of wall time; throws if it never does.
/// Between tries it pauses for a millisecond, so that polling does not take the CPU from the
/// loops it waits for; what a test checks depends on the condition and the deadline only,
/// never on the pause.
public func pollUntil(seconds: Int = 10, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(1))
    }
    throw PollTimeout(seconds: seconds)
}

/// A condition ``pollUntil(seconds:_:)`` waited for did not hold in time.
public struct PollTimeout: Error, CustomStringConvertible {
    public let seconds: Int
    public var description: String { "condition not met in \(seconds) s" }
}
