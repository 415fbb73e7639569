import Sluice
import SluiceTestSupport
import Testing

extension GateTicket {
    /// The ticket's outcome, waited for at most `seconds` of wall time (times
    /// ``deadlineScale``). Past that an issue naming the wait is recorded, the waiting request
    /// leaves (as a cancelled caller's does) and ``PollTimeout`` is thrown: an outcome that never
    /// comes fails its test with its place in the source, instead of hanging the whole run.
    ///
    /// The deadline only detects a hang: a manual clock drives what the tests decide, and no
    /// test depends on how soon the outcome comes within it.
    func settledOutcome(
        within seconds: Int = 10, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> GateOutcome<Output> {
        let scaled = seconds * deadlineScale
        let settled: GateOutcome<Output>? = await withTaskGroup(of: Settling.self) { group in
            group.addTask { .outcome(await self.outcome) }
            group.addTask {
                do {
                    try await Task.sleep(for: .seconds(scaled))
                    return .deadline
                } catch {
                    // Cancelled: the outcome has come, or the test's task was cancelled (and
                    // the outcome, cancelled with it, is what the test sees).
                    return .cancelled
                }
            }
            while let next = await group.next() {
                switch next {
                case .outcome(let outcome):
                    group.cancelAll()
                    return outcome
                case .deadline:
                    group.cancelAll()
                    return nil
                case .cancelled:
                    continue
                }
            }
            return nil
        }
        guard let settled else {
            Issue.record("timed out waiting for a ticket's outcome: none in \(scaled) s", sourceLocation: sourceLocation)
            throw PollTimeout(seconds: scaled)
        }
        return settled
    }

    /// What finished first while ``settledOutcome(within:sourceLocation:)`` waited.
    private enum Settling: Sendable {
        case outcome(GateOutcome<Output>)
        case deadline
        case cancelled
    }
}
