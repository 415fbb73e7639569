#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock of one ``GateShard``: a recursive POSIX mutex, so that code the shard runs while
/// holding it (an effect run in place counting its tally, a policy timer due before an event)
/// can enter the shard again on the same thread.
///
/// A POSIX mutex rather than `Synchronization.Mutex`: ThreadSanitizer intercepts it, so the
/// ordering it gives is visible to the sanitizer without annotations, and it is recursive.
@usableFromInline
final class ShardLock: @unchecked Sendable {
    // @unchecked Sendable: the mutex is the synchronisation itself; its storage is allocated
    // once, never moves, and is only passed to the pthread functions.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable
    func lock() {
        pthread_mutex_lock(mutex)
    }

    @inlinable
    func unlock() {
        pthread_mutex_unlock(mutex)
    }
}
