import Sluice
import SluiceTestSupport
import Testing

extension GateTicket {
    /// The ticket's outcome, polled for with ``pollUntil(seconds:_:)`` for at most `seconds`
    /// of wall time (times ``deadlineScale``). Past that an issue naming the wait is recorded,
    /// the request leaves (``cancel()``) and ``PollTimeout`` is thrown: an outcome that never
    /// comes fails its test with its place in the source, instead of hanging the whole run.
    ///
    /// The deadline only detects a hang: a manual clock drives what the tests decide, and no
    /// test depends on how soon the outcome comes within it.
    func settledOutcome(
        within seconds: Int = 10, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> GateOutcome<Output> {
        do {
            try await pollUntil(seconds: seconds) { resolvedOutcome != nil }
        } catch let timeout as PollTimeout {
            cancel()
            Issue.record("timed out waiting for a ticket's outcome: \(timeout)", sourceLocation: sourceLocation)
            throw timeout
        }
        return await outcome
    }
}
