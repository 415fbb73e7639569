import SluiceCore
import SluiceLibevent
import Synchronization

/// When a front last received a request: a server that is shutting down waits until its
/// clients have gone quiet before it stops its loops, so that a request already on its way
/// (sent before the client read the shutdown answer that closed its connection) is read and
/// answered, not reset with the connection.
public final class RequestActivity: Sendable {
    /// The last request's instant on the loops' monotonic timeline, in nanoseconds.
    private let last = Atomic<Int64>(0)

    /// An activity with no request yet.
    public init() {}

    /// A request arrived at `instant` (a loop's cached `now`: nothing is read per request).
    @inlinable
    public func record(_ instant: Instant) {
        storeLast(instant.nanoseconds)
    }

    @usableFromInline
    func storeLast(_ nanoseconds: Int64) {
        last.store(nanoseconds, ordering: .relaxed)
    }

    /// Returns once no request has arrived for `quiet`, or after `limit` at most.
    public func waitForQuiet(_ quiet: Duration = .milliseconds(100), atMost limit: Duration = .seconds(2)) async {
        let deadline = SluiceLoop.monotonicNow() + limit
        while true {
            let now = SluiceLoop.monotonicNow()
            let since = now - Instant(nanoseconds: last.load(ordering: .relaxed))
            if since >= quiet || now >= deadline { return }
            try? await Task.sleep(for: min(quiet - since, deadline - now))
        }
    }
}
