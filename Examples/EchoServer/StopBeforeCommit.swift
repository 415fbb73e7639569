import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `--pay-stop-before-commit`, for tests: the first payment to reach its commit point stops this
/// process (SIGSTOP) right there, so that a test stops an owner before its commit guard however
/// late the test itself runs; a SIGCONT wakes the payment straight into the guard.
enum StopBeforeCommit {
    private static let stopped = Atomic<Bool>(false)

    /// Stops this process the first time it is called; later calls return at once. The signal is
    /// raised on the calling thread, which is stopped before `raise` returns (a signal sent to
    /// the process may be taken by another thread, and this one would run on until that thread
    /// has stopped the rest).
    static func stopOnce() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        raise(SIGSTOP)
    }
}
