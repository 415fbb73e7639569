import Foundation
import Testing

/// A data race planted on purpose, to show that the sanitizer run in CI fails on one. It runs
/// only with `SLUICE_PLANTED_RACE=1` in the environment (`SLUICE_PLANTED_RACE=1 bash .ci/run`
/// must fail in its ThreadSanitizer step); otherwise it is skipped.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["SLUICE_PLANTED_RACE"] == "1", "set SLUICE_PLANTED_RACE=1 to plant a race"))
struct PlantedRaceTests {
    /// A counter with no lock at all.
    final class Unguarded: @unchecked Sendable {
        // @unchecked Sendable: deliberately unsafe; this is the race the sanitizer must report.
        var count = 0
    }

    @Test func twoThreadsIncrementOneCounterWithoutALock() async {
        let counter = Unguarded()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        Thread {
                            for _ in 0..<10_000 { counter.count += 1 }
                            done.resume()
                        }.start()
                    }
                }
            }
        }
        #expect(counter.count > 0)
    }
}
