import CSluiceCacheHints

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
    /// Whether ``lock()`` tries the mutex a while before it waits for it: not under
    /// ThreadSanitizer, which records a lock taken by `pthread_mutex_trylock` without the
    /// lock-order edges its deadlock detection needs (no two shards' locks may ever be held in
    /// opposite orders), and whose interceptors make spinning pointless anyway.
    @usableFromInline let spins: Bool

    init() {
        spins = !threadSanitizerIsLoaded
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

    /// How many times ``lock()`` tries the mutex, pausing between tries, before it waits for it
    /// in the kernel.
    @inlinable
    static var triesBeforeWaiting: Int { 64 }

    /// Takes the mutex. A shard's critical sections mostly last well under a microsecond, and a
    /// thread that waits in the kernel costs two system calls and two context switches (the
    /// waiter's sleep, and its wakeup by the holder's unlock): several microseconds, many times
    /// the wait. So a thread that finds the mutex held tries it again first, up to
    /// ``triesBeforeWaiting`` times with a pause between tries (under a microsecond to a few,
    /// depending on the processor), as glibc's adaptive mutexes do (which cannot be recursive).
    @inlinable
    func lock() {
        guard spins else {
            pthread_mutex_lock(mutex)
            return
        }
        var tries = 1
        while pthread_mutex_trylock(mutex) != 0 {
            if tries == Self.triesBeforeWaiting {
                pthread_mutex_lock(mutex)
                return
            }
            tries &+= 1
            sluice_spin_pause()
        }
    }

    @inlinable
    func unlock() {
        pthread_mutex_unlock(mutex)
    }
}

/// Whether ThreadSanitizer's runtime is in this process (its initialiser is a symbol of the
/// process).
private let threadSanitizerIsLoaded: Bool = {
    guard let process = dlopen(nil, RTLD_NOW) else { return false }
    defer { dlclose(process) }
    return dlsym(process, "__tsan_init") != nil
}()
