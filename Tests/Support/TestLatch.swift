import SluiceLibevent
import Synchronization

/// A latch a test opens: a task that waits before it opens resumes when it does; one that waits
/// after resumes at once.
public final class TestLatch: Sendable {
    private struct State {
        var waiting: [CheckedContinuation<Void, Never>] = []
        var opened = false
    }

    private let state = Mutex(State())

    /// A closed latch.
    public init() {}

    /// Whether a task is waiting for it.
    public var hasWaiters: Bool { state.withSanitizedLock { !$0.waiting.isEmpty } }

    /// Returns once the latch is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withSanitizedLock { state -> Bool in
                if state.opened { return true }
                state.waiting.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Opens it, resuming every task waiting.
    public func open() {
        let waiting = state.withSanitizedLock { state -> [CheckedContinuation<Void, Never>] in
            state.opened = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
