import Benchmark
import Dispatch
import SluiceLibevent
import Synchronization

/// Jobs per second through a `SluiceLoop`, enqueued from another thread (the benchmark's own
/// thread, never the loop's) and run on the loop. Each iteration starts a fresh loop, then
/// measures from the first enqueue until the last job has run (the last job signals a
/// semaphore the producer waits on), so the figure includes draining the queue, not only
/// enqueueing. The loop's start and shutdown are outside the measurement.
///
/// Throughput is reported per scaled iteration: with `scalingFactor: .mega`, `1 M` jobs per
/// iteration, so the throughput column reads in jobs/s (× the shown unit).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.throughput, .wallClock, .cpuTotal, .mallocCountTotal],
        scalingFactor: .mega,
        maxDuration: .seconds(5),
        maxIterations: 20
    )

    /// A counter the jobs bump, so each job does observable work and the producer can check
    /// that every job ran exactly once.
    final class Tally: Sendable {
        let count = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let expected: Int
        init(expected: Int) { self.expected = expected }

        /// Called by each job on the loop.
        func bump() {
            if count.wrappingAdd(1, ordering: .relaxed).newValue == expected { done.signal() }
        }
    }

    Benchmark("Loop execute (closure) from another thread → run") { benchmark in
        let loop = try! SluiceLoop(name: "bench-loop")
        let jobs = benchmark.scaledIterations.count
        let tally = Tally(expected: jobs)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            loop.execute { tally.bump() }
        }
        tally.done.wait()
        benchmark.stopMeasurement()
        precondition(tally.count.load(ordering: .relaxed) == jobs, "a job ran twice or not at all")
        loop.shutdownGracefully()
    }

    Benchmark("Loop Task(executorPreference: loop) from another thread → run") { benchmark in
        let loop = try! SluiceLoop(name: "bench-loop")
        let jobs = benchmark.scaledIterations.count
        let tally = Tally(expected: jobs)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            Task(executorPreference: loop) { tally.bump() }
        }
        tally.done.wait()
        benchmark.stopMeasurement()
        precondition(tally.count.load(ordering: .relaxed) == jobs, "a task ran twice or not at all")
        loop.shutdownGracefully()
    }

    Benchmark(
        "Loop actor hop from another thread → run",
        configuration: .init(scalingFactor: .kilo)
    ) { benchmark in
        // One task off the loop awaits an actor pinned to the loop, N times in a row: each call
        // is a hop onto the loop and back (a round trip, not a pipelined enqueue).
        let loop = try! SluiceLoop(name: "bench-loop")
        let counter = LoopCounter(loop: loop)
        let jobs = benchmark.scaledIterations.count
        let finished = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        Task.detached {
            for _ in 0..<jobs { await counter.bump() }
            finished.signal()
        }
        finished.wait()
        benchmark.stopMeasurement()
        loop.execute { precondition(counter.loopCount == jobs, "a hop was lost") }
        loop.shutdownGracefully()
    }
}

/// An actor whose executor is the loop.
actor LoopCounter {
    let loop: SluiceLoop
    private(set) var count = 0

    init(loop: SluiceLoop) { self.loop = loop }

    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func bump() { count += 1 }

    /// The count, read on the loop thread.
    nonisolated var loopCount: Int { loop.preconditionInEventLoop(); return assumeIsolated { $0.count } }
}
