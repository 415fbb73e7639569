#if Hummingbird
import SluiceLibevent
import Synchronization

/// The rest of a middleware chain, handed from ``IdempotencyMiddleware`` to the idempotent
/// effect that runs it on the gate.
///
/// Hummingbird's `next` may not outlive the middleware's `handle`, so the middleware waits in
/// ``settle()`` before it returns: a chain not started by then is abandoned (an effect that
/// starts later throws `CancellationError`, which releases the record), and one running is
/// waited for. A chain that started never fails: whatever it ends with is stored. The chain
/// itself is dropped as soon as it has run or been abandoned; what it answered is kept.
final class ChainCall: Sendable {
    /// The chain's call.
    struct Chain: @unchecked Sendable {
        // Unchecked: the closure (over Hummingbird's non-Sendable `next`) is called at most once,
        // by the effect, while the middleware that made it waits for the outcome and then in
        // `settle()`; the two never touch it at the same time, and `settle()` returns only
        // once it has been dropped.
        let run: () async -> StoredResponse
    }

    private enum State: Sendable {
        case ready(Chain)
        case running(waiter: CheckedContinuation<Void, Never>?)
        case finished(StoredResponse)
        case abandoned
    }

    private let state: Mutex<State>

    init(_ chain: Chain) {
        state = Mutex(.ready(chain))
    }

    /// Runs the chain, once, and keeps what it answered for ``settle()``. Throws
    /// `CancellationError` when the middleware has left already.
    func run() async throws -> StoredResponse {
        let response = try await callOnce()
        finish(response)
        return response
    }

    /// Takes the chain out of the state and calls it: when this returns, nothing holds it (the
    /// middleware's `withoutActuallyEscaping` may end as soon as ``settle()`` returns).
    private func callOnce() async throws -> StoredResponse {
        let chain = state.withSanitizedLock { state -> Chain? in
            guard case .ready(let chain) = state else { return nil }
            state = .running(waiter: nil)
            return chain
        }
        guard let chain else { throw CancellationError() }
        // The app's handlers run off the gate's loop, so a slow handler holds no key's decisions.
        return await withTaskExecutorPreference(globalConcurrentExecutor) { await chain.run() }
    }

    private func finish(_ response: StoredResponse) {
        let waiter = state.withSanitizedLock { state -> CheckedContinuation<Void, Never>? in
            guard case .running(let waiter) = state else { return nil }
            state = .finished(response)
            return waiter
        }
        waiter?.resume()
    }

    /// Returns once the chain can no longer run: abandons it if it has not started, waits for
    /// it if it is running. Returns what the chain answered, if it ran: the middleware's own
    /// answer when the gate answered it before the chain ended (its caller was cancelled).
    func settle() async -> StoredResponse? {
        let running = state.withSanitizedLock { state -> Bool in
            switch state {
            case .ready:
                state = .abandoned
                return false
            case .running:
                return true
            case .finished, .abandoned:
                return false
            }
        }
        if running {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withSanitizedLock { state -> Bool in
                    guard case .running = state else { return true }
                    state = .running(waiter: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        return state.withSanitizedLock { state -> StoredResponse? in
            guard case .finished(let response) = state else { return nil }
            return response
        }
    }
}
#endif
