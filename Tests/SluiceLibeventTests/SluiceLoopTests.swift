import Foundation
import SluiceCore
import SluiceLibevent
import SluiceTestSupport
import Synchronization
import Testing

/// An actor whose executor is a loop.
private actor PinnedCounter {
    let loop: SluiceLoop
    var count = 0

    init(loop: SluiceLoop) { self.loop = loop }

    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func increment() -> (threadID: Int64, onLoop: Bool, count: Int) {
        count += 1
        return (SluiceLoop.currentThreadID, loop.inEventLoop, count)
    }
}

/// Runs `body` on the loop and returns its result.
private func onLoop<T: Sendable>(_ loop: SluiceLoop, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        loop.execute { continuation.resume(returning: body()) }
    }
}

@Suite struct EventLoopTests {
    @Test func actorPinnedToLoopRunsOnLoopThread() async throws {
        let loop = try SluiceLoop(name: "pinned")
        defer { loop.shutdownGracefully() }
        let loopThread = await onLoop(loop) { SluiceLoop.currentThreadID }
        let testThread = SluiceLoop.currentThreadID

        let counter = PinnedCounter(loop: loop)
        for expected in 1...3 {
            let result = await counter.increment()
            #expect(result.threadID == loopThread)
            #expect(result.onLoop)
            #expect(result.count == expected)
        }
        #expect(loopThread != testThread)
        #expect(!loop.inEventLoop)
    }

    @Test func assumeIsolatedWorksFromLoopCallbacks() async throws {
        let loop = try SluiceLoop(name: "assume")
        defer { loop.shutdownGracefully() }
        let counter = PinnedCounter(loop: loop)
        let count = await onLoop(loop) {
            counter.assumeIsolated { $0.increment().count }
        }
        #expect(count == 1)
    }

    @Test func taskWithLoopPreferenceResumesOnLoop() async throws {
        let loop = try SluiceLoop(name: "preference")
        let other = try SluiceLoop(name: "other")
        defer {
            loop.shutdownGracefully()
            other.shutdownGracefully()
        }
        let loopThread = await onLoop(loop) { SluiceLoop.currentThreadID }
        let otherThread = await onLoop(other) { SluiceLoop.currentThreadID }
        // An actor on another loop: awaiting it really leaves this loop's thread.
        let away = PinnedCounter(loop: other)

        let observed = await Task(executorPreference: loop) { () -> [Int64] in
            var threads: [Int64] = [SluiceLoop.currentThreadID]
            for _ in 0..<5 {
                let visited = await away.increment()
                #expect(visited.threadID == otherThread)
                threads.append(SluiceLoop.currentThreadID)
                #expect(loop.inEventLoop)
                // A continuation resumed from a foreign thread also brings the task back here.
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    Thread { continuation.resume() }.start()
                }
                threads.append(SluiceLoop.currentThreadID)
            }
            return threads
        }.value
        #expect(observed.count == 11)
        #expect(observed.allSatisfy { $0 == loopThread })
    }

    /// libevent measures a timeout from the time it cached when the iteration began: a timer
    /// armed at the end of a long callback would come due early. It must not run early.
    @Test func aTimerArmedLateInALongIterationDoesNotFireEarly() async throws {
        let loop = try SluiceLoop(name: "late-timer")
        defer { loop.shutdownGracefully() }
        let (armedAt, firedAt) = await withCheckedContinuation { (continuation: CheckedContinuation<(Instant, Instant), Never>) in
            loop.execute {
                // A callback that runs 20 ms (busy, as a heavy batch of work would).
                let busyUntil = SluiceLoop.monotonicNow() + .milliseconds(20)
                while SluiceLoop.monotonicNow() < busyUntil {}
                let armedAt = SluiceLoop.monotonicNow()
                loop.schedule(after: .milliseconds(5)) {
                    continuation.resume(returning: (armedAt, SluiceLoop.monotonicNow()))
                }
            }
        }
        #expect(firedAt - armedAt >= .milliseconds(5))
    }

    /// Closing a resource at shutdown may register another (an effect woken by its
    /// cancellation that sleeps again): that one is closed too, not dropped.
    @Test func aResourceRegisteredWhileTheLoopClosesItsResourcesIsClosed() async throws {
        let loop = try SluiceLoop(name: "resources")
        let log = CloseLog()
        let second = RecordingResource(name: "second", log: log, onClose: nil)
        let first = RecordingResource(name: "first", log: log, onClose: { loop.registerForShutdown(second) })
        await loop.submit { loop.registerForShutdown(first) }
        loop.shutdownGracefully()
        #expect(log.names.withSanitizedLock { $0 } == ["first", "second"])
        #expect(!loop.isAcceptingWork)
    }

    @Test func timerFiresAfterItsDelay() async throws {
        let loop = try SluiceLoop(name: "timer")
        defer { loop.shutdownGracefully() }
        let start = SluiceLoop.monotonicNow()
        let firedAt = await withCheckedContinuation { (continuation: CheckedContinuation<(Instant, Bool), Never>) in
            loop.schedule(after: .milliseconds(30)) {
                continuation.resume(returning: (SluiceLoop.monotonicNow(), loop.inEventLoop))
            }
        }
        #expect(firedAt.0 - start >= .milliseconds(30))
        #expect(firedAt.1)
    }

    @Test func cancelledTimerNeverFires() async throws {
        let loop = try SluiceLoop(name: "cancel")
        defer { loop.shutdownGracefully() }
        let fired = Atomic<Int>(0)
        // Cancelled from another thread, right away: its deadline is far enough that this thread,
        // preempted on a loaded machine, still cancels it before it is due.
        let early = loop.schedule(after: .milliseconds(500)) { fired.add(1, ordering: .relaxed) }
        early.cancel()
        // Cancelled on the loop, before its deadline.
        await onLoop(loop) {
            let onLoopTimer = loop.schedule(after: .milliseconds(5)) { fired.add(10, ordering: .relaxed) }
            onLoopTimer.cancel()
        }
        // A later timer that is not cancelled proves time passed beyond both deadlines.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.schedule(after: .milliseconds(600)) { continuation.resume() }
        }
        #expect(early.isCancelled)
        #expect(fired.load(ordering: .relaxed) == 0)
    }

    @Test func timersFireInDeadlineOrder() async throws {
        let loop = try SluiceLoop(name: "order")
        defer { loop.shutdownGracefully() }
        let order = Mutex<[Int]>([])
        // All three armed by one job on the loop, from the loop's own reading of the time: timers
        // armed when they are already due (a job run late on a loaded machine) fire in no
        // particular order among themselves.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute {
                let base = SluiceLoop.monotonicNow()
                for delay in [300, 100, 200] {
                    loop.schedule(at: base + .milliseconds(Int64(delay))) {
                        let done = order.withSanitizedLock { order -> Bool in
                            order.append(delay)
                            return order.count == 3
                        }
                        if done { continuation.resume() }
                    }
                }
            }
        }
        #expect(order.withSanitizedLock { $0 } == [100, 200, 300])
    }

    @Test func jobsFromFourThreadsRunOnceInOrderPerThread() async throws {
        let loop = try SluiceLoop(name: "fan-in")
        let threads = 4
        let perThread = 10_000
        let recorder = JobRecorder(threads: threads)

        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<threads {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        recorder.startProducer(thread: thread, jobs: perThread, loop: loop, done: done)
                    }
                }
            }
        }
        loop.shutdownGracefully()

        let result = recorder.seen.withSanitizedLock { $0 }
        for thread in 0..<threads {
            #expect(result[thread] == Array(0..<perThread), "thread \(thread): jobs lost, repeated or out of order")
        }
        #expect(recorder.offLoop.load(ordering: .relaxed) == 0)
    }

    @Test func shutdownRunsQueuedJobsAndJoinsTheThread() async throws {
        let loop = try SluiceLoop(name: "shutdown")
        let loopThread = await onLoop(loop) { SluiceLoop.currentThreadID }
        let ran = Atomic<Int>(0)
        // Hold the loop busy so the next jobs are still queued when shutdown starts.
        loop.execute { usleep(50_000) }
        for _ in 0..<1_000 {
            loop.execute { ran.add(1, ordering: .relaxed) }
        }
        loop.shutdownGracefully()

        #expect(ran.load(ordering: .relaxed) == 1_000)
        #expect(loop.isShutDown)
        // The thread has been joined: soon the kernel no longer lists it in this process.
        // `pthread_join` returns once the exiting thread's id is cleared, early in its exit, and
        // /proc may list the exiting thread a little longer: polled, with a deadline. Its id may
        // already belong to another test's new thread (ids are reused at once), so a thread
        // listed under it must at least not be the loop's (threads are named after their loop).
        try await pollUntil {
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(loopThread)/comm", encoding: .utf8)) ?? ""
            return comm.trimmingCharacters(in: .whitespacesAndNewlines) != "shutdown"
        }
        // Later work is refused, not silently dropped.
        #expect(!loop.executeIfRunning {})
        // A second shutdown is harmless.
        loop.shutdownGracefully()
    }

    /// A task that prefers a loop and resumes after the loop stopped (an effect unwinding after
    /// a shutdown) runs to its end, with the loop as its thread's loop, instead of trapping.
    @Test func aTaskResumedAfterItsLoopStoppedRunsToItsEnd() async throws {
        let loop = try SluiceLoop(name: "orphan")
        let parked = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let task = Task(executorPreference: loop) { () -> (Bool, Bool) in
            await withCheckedContinuation { continuation in parked.withSanitizedLock { $0 = continuation } }
            // A timer armed now never fires: the base is gone; arming must not crash.
            loop.schedule(after: .milliseconds(1)) {}
            return (loop.inEventLoop, loop.isShutDown)
        }
        try await pollUntil { parked.withSanitizedLock { $0 != nil } }
        loop.shutdownGracefully()
        parked.withSanitizedLock { $0 }?.resume()
        let (onLoop, stopped) = await task.value
        #expect(onLoop)
        #expect(stopped)
    }

    @Test func nowIsCachedWithinAnIteration() async throws {
        let loop = try SluiceLoop(name: "now")
        defer { loop.shutdownGracefully() }
        let (first, second, fresh) = await onLoop(loop) { () -> (Instant, Instant, Instant) in
            let first = loop.now
            usleep(2_000)
            return (first, loop.now, SluiceLoop.monotonicNow())
        }
        #expect(first == second)
        #expect(fresh - first >= .milliseconds(2))
        let later = await onLoop(loop) { loop.now }
        #expect(later > first)
    }

    @Test func groupPicksLoopsRoundRobinAndByKey() throws {
        let group = try SluiceLoopGroup(loopCount: 3, namePrefix: "group")
        defer { group.shutdownGracefully() }
        let picked = (0..<6).map { _ in ObjectIdentifier(group.next()) }
        #expect(picked[0] != picked[1] && picked[1] != picked[2] && picked[0] != picked[2])
        #expect(Array(picked[0..<3]) == Array(picked[3..<6]))
        #expect(group.loop(for: "user42") === group.loop(for: "user42"))
        #expect(group.loop(forKeyHash: 4) === group.loops[1])
        #expect(throws: SluiceError.self) { try SluiceLoopGroup(loopCount: 0) }
    }

    /// On a manual clock, the next deadline is the earliest timer still to run: a cancelled
    /// timer's is gone at once, a fired one's with it.
    @Test func aCancelledTimerLeavesTheManualClock() async throws {
        let clock = ManualLoopClock()
        let loop = try SluiceLoop(name: "manual", clock: clock)
        defer { loop.shutdownGracefully() }
        let start = clock.now
        let fired = Mutex<[Int]>([])
        let timers = await onLoop(loop) {
            (
                loop.schedule(after: .seconds(5)) { fired.withSanitizedLock { $0.append(5) } },
                loop.schedule(after: .seconds(10)) { fired.withSanitizedLock { $0.append(10) } }
            )
        }
        #expect(clock.nextDeadline == start + .seconds(5))
        timers.0.cancel()
        #expect(clock.nextDeadline == start + .seconds(10))
        clock.advance(by: .seconds(10))
        await onLoop(loop) {}
        #expect(fired.withSanitizedLock { $0 } == [10])
        #expect(clock.nextDeadline == nil)
    }
}

/// Records which jobs ran, per producing thread.
private final class JobRecorder: Sendable {
    let seen: Mutex<[[Int]]>
    let offLoop = Atomic<Int>(0)

    init(threads: Int) {
        seen = Mutex(Array(repeating: [], count: threads))
    }

    /// Starts a thread that enqueues `jobs` numbered jobs onto `loop`, then resumes `done`.
    func startProducer(thread: Int, jobs: Int, loop: SluiceLoop, done: CheckedContinuation<Void, Never>) {
        let producer = Thread { [self] in
            for sequence in 0..<jobs {
                loop.execute {
                    if !loop.inEventLoop { self.offLoop.add(1, ordering: .relaxed) }
                    self.seen.withSanitizedLock { $0[thread].append(sequence) }
                }
            }
            done.resume()
        }
        producer.start()
    }
}

/// The names of the resources closed, in order.
private final class CloseLog: Sendable {
    let names = Mutex<[String]>([])
}

/// A loop resource that records its closing and may run something then.
private final class RecordingResource: LoopResource, Sendable {
    let name: String
    let log: CloseLog
    let onClose: (@Sendable () -> Void)?

    init(name: String, log: CloseLog, onClose: (@Sendable () -> Void)?) {
        self.name = name
        self.log = log
        self.onClose = onClose
    }

    func closeForShutdown() {
        log.names.withSanitizedLock { $0.append(name) }
        onClose?()
    }
}
