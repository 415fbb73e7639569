import CLibevent
import CSluiceShims
import SluiceCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A libevent `event_base` running on a thread of its own, usable as a Swift executor.
///
/// `SluiceLoop` is both a `SerialExecutor` (an actor whose `unownedExecutor` is the loop runs on
/// the loop thread) and a `TaskExecutor` (a task started with `Task(executorPreference: loop)`
/// resumes on the loop thread after each `await`). Sockets and timers on the same base are
/// driven by the same thread, so an actor pinned to the loop can be entered synchronously from a
/// libevent callback with `assumeIsolated`.
///
/// Create loops directly or through ``SluiceLoopGroup``; stop each with ``shutdownGracefully()``.
///
/// With the epoll backend (Linux) the base batches its epoll changes and applies them once per
/// iteration (libevent's changelist), which saves system calls on every request. A socket you
/// watch on ``base`` yourself must therefore not be `dup`ed or inherited by a child process:
/// open it close-on-exec, as the loop's own listeners, connections and clients are. (The Redis
/// client's socket is made close-on-exec just after hiredis opens it: a child spawned in that
/// instant would still inherit it.)
///
/// ```swift
/// let loop = try SluiceLoop()
/// loop.execute { print("on the loop") }
/// let timer = loop.schedule(after: .milliseconds(5)) { print("5 ms later") }
/// timer.cancel()
/// loop.shutdownGracefully()
/// ```
public final class SluiceLoop: SerialExecutor, TaskExecutor, CustomStringConvertible,
    @unchecked Sendable
{
    // @unchecked Sendable: every stored property is either immutable after `init`, guarded by
    // `queue` (a `Mutex`), atomic, or — the `loopOnly` state below — read and written only on
    // the loop's own thread, which `assertInEventLoop()` checks in debug builds.

    /// How many queued jobs one wake-up runs before libevent gets to poll the sockets again.
    public static let maximumJobsPerWakeUp = 1024

    /// A short name for logs and thread names.
    public let name: String

    /// The underlying `event_base`. Use it only on the loop thread.
    public let base: OpaquePointer

    /// The read and staging buffers this loop's connections share (loop thread only).
    let scratch = LoopScratch(readSize: TCPConnection.readSize)

    /// Made active (`event_active`) by an enqueue that finds no wake-up pending.
    private let wakeEvent: OpaquePointer
    /// A zero timeout, added when one wake-up left jobs queued: libevent polls the sockets before
    /// it fires (an `event_active` from inside a callback would run in the same pass).
    private let yieldEvent: OpaquePointer
    private let queue: Mutex<JobQueue>
    /// Work that arrived after the loop stopped (see ``enqueue(_:)`` and ``execute(_:)``).
    private let orphans = Mutex(OrphanQueue())
    private let threadBox = Mutex<pthread_t?>(nil)
    private let stopped = Atomic<Bool>(false)

    /// Loop-thread-only state (see the `@unchecked Sendable` note above).
    private var loopOnly: LoopThreadState {
        _read { yield loopOnlyStorage.pointee }
        _modify { yield &loopOnlyStorage.pointee }
    }
    /// Behind a pointer rather than a stored `var`: the loop reads it for every job and every
    /// `now`, and a class's stored `var` pays a dynamic exclusivity check on each access.
    private let loopOnlyStorage: UnsafeMutablePointer<LoopThreadState> = {
        let storage = UnsafeMutablePointer<LoopThreadState>.allocate(capacity: 1)
        storage.initialize(to: LoopThreadState())
        return storage
    }()

    /// The timeline a test moves by hand, when the loop was made with one (see
    /// ``ManualLoopClock``); `nil`: the monotonic clock.
    public let manualClock: ManualLoopClock?

    /// Creates an event base and starts its thread.
    ///
    /// - Parameters:
    ///   - name: the thread's name.
    ///   - clock: a timeline for the loop's time, timers and connection timeouts that a test
    ///     moves by hand; `nil` (the default) runs them on the monotonic clock.
    /// - Throws: `SluiceError` when libevent cannot create the base or the thread cannot
    ///   start.
    public init(name: String = "sluice-loop", clock: ManualLoopClock? = nil) throws(SluiceError) {
        LibeventThreading.enable()
        self.name = name
        self.manualClock = clock

        guard let config = event_config_new() else {
            throw SluiceError(code: .baseCreationFailed, message: "event_config_new failed", value: name)
        }
        defer { event_config_free(config) }
        // Precise (CLOCK_MONOTONIC) timers instead of the coarse clock: policies decide in
        // milliseconds.
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_PRECISE_TIMER.rawValue))
        // epoll changes are batched and applied once per iteration: a connection that stops
        // reading while it handles a request and reads again once it is answered costs no
        // `epoll_ctl` when both happen in one iteration.
        // The one constraint (libevent's): a socket the loop watches must not be `dup`ed, nor
        // inherited by a child process, so every socket it opens is close-on-exec.
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        guard let base = event_base_new_with_config(config) else {
            throw SluiceError(code: .baseCreationFailed, message: "event_base_new_with_config failed", value: name)
        }
        self.base = base
        self.queue = Mutex(JobQueue())

        // The wake-up event is persistent and never has a file descriptor: other threads make it
        // active with `event_active`. Its context is unretained: the loop outlives it.
        // Both callbacks find the loop through the thread's loop identity.
        guard let wake = event_new(base, -1, Int16(EV_PERSIST), eventLoopWakeCallback, nil),
            let yield = event_new(base, -1, 0, eventLoopWakeCallback, nil)
        else {
            event_base_free(base)
            throw SluiceError(code: .baseCreationFailed, message: "event_new (wake-up) failed", value: name)
        }
        self.wakeEvent = wake
        self.yieldEvent = yield
        event_add(wake, nil)

        try startThread()
    }

    deinit {
        precondition(stopped.load(ordering: .acquiring), "SluiceLoop \(name) deinitialised while running: call shutdownGracefully()")
        loopOnlyStorage.deinitialize(count: 1)
        loopOnlyStorage.deallocate()
    }

    public var description: String { "SluiceLoop(\(name))" }

    // MARK: - Thread identity

    /// Whether the caller runs on this loop's thread.
    public var inEventLoop: Bool {
        sluice_current_loop_get() == Unmanaged.passUnretained(self).toOpaque()
    }

    /// The loop whose thread the caller runs on, if any.
    public static var current: SluiceLoop? {
        guard let pointer = sluice_current_loop_get() else { return nil }
        return Unmanaged<SluiceLoop>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Traps unless the caller runs on this loop's thread.
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "not on \(name)'s thread", file: file, line: line)
    }

    /// Traps in debug builds unless the caller runs on this loop's thread.
    @inlinable
    public func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "not on \(name)'s thread", file: file, line: line)
    }

    // MARK: - Time

    /// The loop's monotonic time, read at most once per loop iteration.
    ///
    /// Everything handled in one iteration (one batch of socket and timer callbacks) sees the
    /// same instant. Call on the loop thread only.
    public var now: Instant {
        assertInEventLoop()
        if let manualClock { return manualClock.now }
        if let cached = loopOnly.cachedNow { return cached }
        let fresh = Instant(nanoseconds: sluice_monotonic_nanoseconds())
        loopOnly.cachedNow = fresh
        return fresh
    }

    /// The loop's time read now, not cached (any thread): the monotonic clock's, or the manual
    /// clock's for a loop made with one. Deadlines of timers and connections are on it.
    public var currentTime: Instant {
        manualClock?.now ?? Self.monotonicNow()
    }

    /// The current monotonic time, read now (any thread).
    public static func monotonicNow() -> Instant {
        Instant(nanoseconds: sluice_monotonic_nanoseconds())
    }

    /// The wall clock's current millisecond since the Unix epoch (any thread). Never for
    /// durations (it jumps); for numbers that should grow from one run of a process to the next.
    public static func wallClockMilliseconds() -> Int64 {
        sluice_wall_clock_milliseconds()
    }

    // MARK: - Executors

    /// Runs `job` on the loop thread. After the loop has stopped, a job still arriving (a task
    /// that prefers this loop, resumed late: a cancelled effect unwinding after a shutdown) is
    /// run at once on the enqueuing thread, serially with any other such job and with this loop
    /// as the thread's loop, rather than dropped (a task that never resumes) or trapping. Timers
    /// it arms never fire: the event base is gone.
    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    /// Runs work that arrived after the loop stopped: at once on the enqueuing thread, serially
    /// with any other such work, with this loop as the thread's loop. Never dropped (a dropped
    /// job is a task that never resumes, a dropped closure a completion never called) and never
    /// a trap.
    private func runOrphan(_ job: LoopJob) {
        let mustDrain = orphans.withSanitizedLock { orphans -> Bool in
            orphans.jobs.append(job)
            if orphans.draining { return false }
            orphans.draining = true
            return true
        }
        guard mustDrain else { return }
        let previous = sluice_current_loop_get()
        sluice_current_loop_set(Unmanaged.passUnretained(self).toOpaque())
        defer { sluice_current_loop_set(previous) }
        while let next = orphans.withSanitizedLock({ orphans -> LoopJob? in
            if orphans.jobs.isEmpty {
                orphans.draining = false
                return nil
            }
            return orphans.jobs.removeFirst()
        }) {
            loopOnly.cachedNow = nil
            switch next {
            case .job(let job):
                job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
            case .closure(let body):
                body()
            case .stop:
                break
            }
        }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(inEventLoop, "expected to be isolated to \(name), but running on another thread")
    }

    public func isIsolatingCurrentContext() -> Bool? {
        inEventLoop
    }

    public func isSameExclusiveExecutionContext(other: SluiceLoop) -> Bool {
        self === other
    }

    /// Runs `body` on the loop thread, after everything queued before it.
    ///
    /// After the loop has stopped, `body` still runs, at once on the calling thread (serially
    /// with other late work, with this loop as the thread's loop): what it touches of the loop's
    /// resources is closed by then (a closed connection ignores writes, a timer it arms never
    /// fires). Work that has nothing to do after a shutdown uses ``executeIfRunning(_:)``.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        submit(.closure(body))
    }

    /// Runs `body` on the loop thread if the loop still accepts work; returns `false` (and drops
    /// `body`) once the loop has shut down. For clean-up work that has nothing to do after a
    /// shutdown.
    @discardableResult
    public func executeIfRunning(_ body: @escaping @Sendable () -> Void) -> Bool {
        enqueueIfAccepting(.closure(body))
    }

    private func submit(_ job: LoopJob) {
        if !enqueueIfAccepting(job) {
            runOrphan(job)
        }
    }

    private func enqueueIfAccepting(_ job: LoopJob) -> Bool {
        let (accepted, mustWake) = queue.withSanitizedLock { queue -> (Bool, Bool) in
            guard queue.accepting else { return (false, false) }
            queue.jobs.append(job)
            if queue.wakePending { return (true, false) }
            queue.wakePending = true
            return (true, true)
        }
        if mustWake {
            event_active(wakeEvent, Int32(EV_READ), 0)
        }
        return accepted
    }

    /// Runs queued jobs: called by the wake-up event on the loop thread.
    fileprivate func runQueuedJobs() {
        // Leftovers of the previous wake-up run first: they were queued before anything newer.
        let tookQueue = loopOnly.batch.isEmpty
        if tookQueue {
            queue.withSanitizedLock { queue in
                swap(&queue.jobs, &loopOnly.batch)
                queue.wakePending = false
            }
            loopOnly.batchHead = 0
        }
        let end = min(loopOnly.batch.count, loopOnly.batchHead + Self.maximumJobsPerWakeUp)
        while loopOnly.batchHead < end {
            let job = loopOnly.batch[loopOnly.batchHead]
            loopOnly.batchHead += 1
            run(job)
        }
        let exhausted = loopOnly.batchHead == loopOnly.batch.count
        if exhausted {
            loopOnly.batch.removeAll(keepingCapacity: true)
            loopOnly.batchHead = 0
        }
        if !exhausted || !tookQueue {
            // More than one wake-up's worth, or a wake-up that was spent on leftovers while the
            // queue may have filled: let libevent poll the sockets, then come back. (An
            // `event_active` from inside a callback would run again in the same pass.)
            var zero = timeval(tv_sec: 0, tv_usec: 0)
            event_add(yieldEvent, &zero)
        }
    }

    private func run(_ job: LoopJob) {
        switch job {
        case .job(let job):
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        case .closure(let body):
            body()
        case .stop:
            loopOnly.stopRequested = true
        }
    }

    // MARK: - Timers

    /// Runs `body` on the loop thread once `deadline` (on the loop's monotonic timeline) has
    /// passed, unless the returned timer is cancelled first. Timers fire in deadline order,
    /// except timers armed when already due, which fire in no particular order among themselves.
    @discardableResult
    public func schedule(at deadline: Instant, _ body: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer(loop: self, deadline: deadline, body: body)
        if inEventLoop {
            arm(timer)
        } else {
            execute { self.arm(timer) }
        }
        return timer
    }

    /// Runs `body` on the loop thread after `delay`, unless the returned timer is cancelled
    /// first.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> LoopTimer {
        schedule(at: currentTime + delay, body)
    }

    private func arm(_ timer: LoopTimer) {
        assertInEventLoop()
        guard !timer.isCancelled, !loopOnly.stopRequested else {
            timer.body = nil
            return
        }
        if let manualClock {
            manualClock.schedule(at: timer.deadline, owner: self, key: ObjectIdentifier(timer)) { [self] in
                executeIfRunning { self.fireManually(timer) }
            }
            return
        }
        let context = Unmanaged.passRetained(timer).toOpaque()
        guard let event = event_new(base, -1, 0, eventLoopTimerCallback, context) else {
            Unmanaged<LoopTimer>.fromOpaque(context).release()
            fatalError("SluiceLoop \(name): event_new failed for a timer")
        }
        timer.event = event
        loopOnly.armedTimers[ObjectIdentifier(timer)] = timer
        let delay = max(0, timer.deadline.nanoseconds - sluice_monotonic_nanoseconds())
        var tv = timeval(duration: .nanoseconds(delay))
        event_add(event, &tv)
    }

    /// Called on the loop thread when a timer's event fires or is cancelled: frees the event and
    /// drops the event's reference to the timer.
    fileprivate func disarm(_ timer: LoopTimer) {
        assertInEventLoop()
        timer.body = nil
        // A timer cancelled off the loop while its arming was queued: the arming ran first.
        manualClock?.cancel(ObjectIdentifier(timer))
        guard let event = timer.event else { return }
        timer.event = nil
        event_del(event)
        event_free(event)
        loopOnly.armedTimers[ObjectIdentifier(timer)] = nil
        Unmanaged.passUnretained(timer).release()
    }

    fileprivate func fire(_ timer: LoopTimer) {
        // libevent measures a timeout from the time it cached when the iteration began (and may
        // read a coarse clock), so a timer armed late in a long iteration can come due early:
        // wait out what is left rather than run before the deadline.
        let early = timer.deadline.nanoseconds - sluice_monotonic_nanoseconds()
        if early > 0, !timer.isCancelled, let event = timer.event {
            var tv = timeval(duration: .microseconds((early + 999) / 1_000))
            event_add(event, &tv)
            return
        }
        let body = timer.body
        disarm(timer)
        if !timer.isCancelled {
            body?()
        }
    }

    /// Runs a timer of a manual clock whose deadline the clock reached.
    private func fireManually(_ timer: LoopTimer) {
        let body = timer.body
        timer.body = nil
        if !timer.isCancelled { body?() }
    }

    fileprivate func cancel(_ timer: LoopTimer) {
        if inEventLoop {
            disarm(timer)
        } else {
            // Off the loop, the clock lets go at once (its next deadline is then exact); `disarm`
            // drops what an arming still queued adds.
            manualClock?.cancel(ObjectIdentifier(timer))
            executeIfRunning { self.disarm(timer) }
        }
    }

    // MARK: - Connections waiting for the buffer budget

    /// Adds `connection` to the connections woken when their accounting is back under its
    /// budget; one timer checks every 5 ms while any waits (loop thread only).
    func waitForBudget(_ connection: TCPConnection) {
        assertInEventLoop()
        scratch.budgetWaiters.append(connection)
        guard !scratch.budgetTimerArmed else { return }
        scratch.budgetTimerArmed = true
        _ = schedule(after: .milliseconds(5)) { [self] in checkBudgetWaiters() }
    }

    private func checkBudgetWaiters() {
        scratch.budgetTimerArmed = false
        scratch.budgetChecks &+= 1
        // Every 20th check (100 ms), waiters that watch nothing are asked whether their peer
        // reset them.
        let probeResets = scratch.budgetChecks % 20 == 0
        let waiters = scratch.budgetWaiters
        scratch.budgetWaiters.removeAll(keepingCapacity: true)
        for connection in waiters {
            if connection.isOpen && connection.isOverBudget {
                if probeResets { connection.closeIfReset() }
                if connection.isOpen { scratch.budgetWaiters.append(connection) }
            } else {
                connection.budgetAvailable()
            }
        }
        if !scratch.budgetWaiters.isEmpty && !scratch.budgetTimerArmed {
            scratch.budgetTimerArmed = true
            _ = schedule(after: .milliseconds(5)) { [self] in checkBudgetWaiters() }
        }
    }

    // MARK: - Resources closed at shutdown

    /// Registers something that must be closed on the loop thread before the base is freed
    /// (listeners, connections). Call on the loop thread.
    public func registerForShutdown(_ resource: any LoopResource) {
        assertInEventLoop()
        if loopOnly.closingResources {
            resource.closeForShutdown()
            return
        }
        loopOnly.resources[ObjectIdentifier(resource)] = resource
    }

    /// Removes a resource registered with ``registerForShutdown(_:)``. Call on the loop thread.
    public func unregisterForShutdown(_ resource: any LoopResource) {
        assertInEventLoop()
        loopOnly.resources[ObjectIdentifier(resource)] = nil
    }

    // MARK: - Thread and shutdown

    private func startThread() throws(SluiceError) {
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            let loop = Unmanaged<SluiceLoop>.fromOpaque(context!).takeRetainedValue()
            loop.threadMain()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<SluiceLoop>.fromOpaque(context).release()
            event_free(wakeEvent)
            event_free(yieldEvent)
            event_base_free(base)
            stopped.store(true, ordering: .releasing)
            throw SluiceError(code: .threadStartFailed, message: "pthread_create failed with \(result)", value: name)
        }
        threadBox.withSanitizedLock { $0 = thread }
    }

    private func threadMain() {
        sluice_set_thread_name(String(name.prefix(15)))
        // Sockets are written on this thread only: a peer that has gone must cost an EPIPE
        // (reported as a closed connection), never the process.
        sluice_block_sigpipe_on_current_thread()
        sluice_current_loop_set(Unmanaged.passUnretained(self).toOpaque())
        defer { sluice_current_loop_set(nil) }

        while !loopOnly.stopRequested {
            loopOnly.cachedNow = nil
            event_base_loop(base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY)
        }
        drainAfterStop()
    }

    /// Runs what is still queued (and what that enqueues), then refuses further work, closes the
    /// registered resources and frees every event and the base.
    private func drainAfterStop() {
        while true {
            loopOnly.cachedNow = nil
            var leftovers = Array(loopOnly.batch[loopOnly.batchHead...])
            loopOnly.batch.removeAll()
            loopOnly.batchHead = 0
            let more = queue.withSanitizedLock { queue -> [LoopJob] in
                let jobs = queue.jobs
                queue.jobs.removeAll()
                if jobs.isEmpty && leftovers.isEmpty { queue.accepting = false }
                return jobs
            }
            leftovers.append(contentsOf: more)
            if leftovers.isEmpty { break }
            for job in leftovers { run(job) }
        }
        // Closing one resource can run code that registers another (an effect woken by its
        // cancellation that sleeps again): close until none is left; one registered from now
        // on is closed at once.
        loopOnly.closingResources = true
        while !loopOnly.resources.isEmpty {
            let resources = loopOnly.resources
            loopOnly.resources.removeAll()
            for resource in resources.values { resource.closeForShutdown() }
        }
        for timer in Array(loopOnly.armedTimers.values) {
            disarm(timer)
        }
        dropConnectionQueues()
        event_del(wakeEvent)
        event_free(wakeEvent)
        event_del(yieldEvent)
        event_free(yieldEvent)
        event_base_free(base)
        stopped.store(true, ordering: .releasing)
    }

    /// Runs everything queued so far, stops the loop, closes its resources and joins its thread.
    ///
    /// Call from outside the loop (joining the loop's thread from itself would deadlock). Jobs
    /// enqueued while the loop drains still run; once it has drained, further work runs on the
    /// thread that submits it (see ``execute(_:)``).
    /// Calling it again is harmless.
    public func shutdownGracefully() {
        precondition(!inEventLoop, "shutdownGracefully() called on \(name)'s own thread: it would deadlock")
        _ = enqueueIfAccepting(.stop)
        let thread = threadBox.withSanitizedLock { box -> pthread_t? in
            defer { box = nil }
            return box
        }
        if let thread {
            pthread_join(thread, nil)
        }
        // What the loop scheduled on a manual clock holds the loop (and its connections): let go.
        manualClock?.forget(self)
    }

    /// Whether the loop still takes work: `false` once it has drained its queue on the way to
    /// stopping (from then on, work that still arrives runs on the enqueuing thread).
    public var isAcceptingWork: Bool {
        queue.withSanitizedLock { $0.accepting }
    }

    /// Whether the loop has stopped and freed its base.
    public var isShutDown: Bool {
        stopped.load(ordering: .acquiring)
    }
}

/// Something a loop closes on its own thread when it shuts down (listeners, connections).
public protocol LoopResource: AnyObject {
    /// Closes the resource; called on the loop thread during shutdown.
    func closeForShutdown()
}

/// A timer scheduled on an ``SluiceLoop``. Cancelling it guarantees its body never runs.
public final class LoopTimer: Sendable {
    /// The instant it fires at, on the loop's monotonic timeline.
    public let deadline: Instant
    /// Dropped once the timer fires, is cancelled or its loop stops, so that what it captures
    /// (often the object holding the timer) is not kept alive by it. Set before the timer is
    /// handed to its loop, then read and cleared on the loop thread only.
    nonisolated(unsafe) fileprivate var body: (@Sendable () -> Void)?
    private let loop: SluiceLoop
    private let cancelled = Atomic<Bool>(false)
    // Written and read on the loop thread only.
    nonisolated(unsafe) fileprivate var event: OpaquePointer?

    fileprivate init(loop: SluiceLoop, deadline: Instant, body: @escaping @Sendable () -> Void) {
        self.loop = loop
        self.deadline = deadline
        self.body = body
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Cancels the timer. Once this returns, the body will not run (from any thread).
    public func cancel() {
        if cancelled.exchange(true, ordering: .acquiringAndReleasing) { return }
        loop.cancel(self)
    }
}

// MARK: - Private machinery

/// Work queued on a loop.
private enum LoopJob: Sendable {
    case job(UnownedJob)
    case closure(@Sendable () -> Void)
    case stop
}

/// The cross-thread queue, guarded by the loop's mutex.
private struct JobQueue: ~Copyable {
    var jobs: [LoopJob] = []
    var wakePending = false
    var accepting = true

    init() {
        jobs.reserveCapacity(256)
    }
}

/// State touched only on the loop thread.
private struct LoopThreadState {
    var cachedNow: Instant?
    var stopRequested = false
    var batch: [LoopJob] = []
    var batchHead = 0
    var armedTimers: [ObjectIdentifier: LoopTimer] = [:]
    var resources: [ObjectIdentifier: any LoopResource] = [:]
    /// The loop is closing its resources on the way to stopping.
    var closingResources = false
}

/// `evthread_use_pthreads()` must run once before any base exists.
private enum LibeventThreading {
    static let enabled: Bool = {
        evthread_use_pthreads() == 0
    }()

    static func enable() {
        precondition(enabled, "evthread_use_pthreads() failed")
    }
}

private func eventLoopWakeCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    SluiceLoop.current!.runQueuedJobs()
}

private func eventLoopTimerCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    let timer = Unmanaged<LoopTimer>.fromOpaque(context!).takeUnretainedValue()
    SluiceLoop.current!.fireTimer(timer)
}

extension SluiceLoop {
    fileprivate func fireTimer(_ timer: LoopTimer) {
        fire(timer)
    }
}

extension SluiceLoop {
    /// The calling thread's kernel id, for diagnostics and tests.
    public static var currentThreadID: Int64 {
        sluice_current_thread_id()
    }
}

/// Work a stopped loop still has to run, and whether a thread is running it.
private struct OrphanQueue {
    var jobs: [LoopJob] = []
    var draining = false
}
