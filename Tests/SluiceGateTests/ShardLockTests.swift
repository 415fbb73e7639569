import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
@testable import Sluice
import Testing

@Suite struct ShardLockTests {
    /// A count that only code holding the lock touches.
    final class GuardedCount: @unchecked Sendable {
        // @unchecked Sendable: `value` is read and written with the lock held only (and read
        // once every writer has finished), which is what the test checks.
        var value = 0
    }

    /// Threads that contend for the lock never hold it at once: a count incremented under it
    /// without atomics loses nothing. Now and then a holder keeps it for 200 µs between reading
    /// the count and writing it back, far longer than a waiter spins, so that the others wait
    /// in the kernel too (an increment made meanwhile without the lock would be lost).
    @Test func contendingThreadsHoldItOneAtATime() {
        let lock = ShardLock()
        let count = GuardedCount()
        let threads = 6
        let increments = 5_000
        let finished = DispatchSemaphore(value: 0)
        // Threads of their own, all running at once (more than the cores, so holders are also
        // preempted while others wait).
        for _ in 0..<threads {
            Thread {
                defer { finished.signal() }
                for increment in 0..<increments {
                    lock.lock()
                    if increment % 100 == 0 {
                        let before = count.value
                        let until = ContinuousClock.now + .microseconds(200)
                        while ContinuousClock.now < until {}
                        count.value = before + 1
                    } else {
                        count.value += 1
                    }
                    lock.unlock()
                }
            }.start()
        }
        for _ in 0..<threads { finished.wait() }
        #expect(count.value == threads * increments)
    }

    /// It is recursive: the thread that holds it takes it again without waiting, and another
    /// thread gets it only once every hold has been released.
    @Test func theHolderTakesItAgainAndOthersWaitForTheLastRelease() {
        let lock = ShardLock()
        lock.lock()
        lock.lock()
        lock.unlock()
        #expect(!Self.takenOnAnotherThread(lock))
        lock.unlock()
        #expect(Self.takenOnAnotherThread(lock))
    }

    /// Whether a thread other than this one can take `lock` without waiting (it releases it
    /// at once).
    static func takenOnAnotherThread(_ lock: ShardLock) -> Bool {
        let answered = DispatchSemaphore(value: 0)
        let taken = GuardedFlag()
        // `async` to a global queue runs on one of its worker threads, never on this one.
        DispatchQueue.global().async {
            if pthread_mutex_trylock(lock.mutex) == 0 {
                pthread_mutex_unlock(lock.mutex)
                taken.value = true
            }
            answered.signal()
        }
        answered.wait()
        return taken.value
    }

    final class GuardedFlag: @unchecked Sendable {
        // @unchecked Sendable: written by one thread before it signals the semaphore that the
        // reader waits on.
        var value = false
    }
}
