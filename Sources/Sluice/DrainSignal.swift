import SluiceLibevent
import Synchronization

/// Wakes a draining gate when every shard is idle or the grace period is over, whichever comes
/// first.
final class DrainSignal: Sendable {
    private struct State {
        var busyShards: Int
        var done = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    private let state: Mutex<State>

    init(shards: Int) {
        state = Mutex(State(busyShards: shards))
    }

    /// One shard has no execution left.
    func shardIsIdle() {
        finish { $0.busyShards -= 1; return $0.busyShards <= 0 }
    }

    /// The grace period is over.
    func graceOver() {
        finish { _ in true }
    }

    /// Waits until every shard is idle or the grace period is over.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withSanitizedLock { state -> Bool in
                if state.done { return true }
                state.continuation = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    private func finish(_ update: (inout State) -> Bool) {
        let continuation = state.withSanitizedLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.done, update(&state) else { return nil }
            state.done = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }
}
